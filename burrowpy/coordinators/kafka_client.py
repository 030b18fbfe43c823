"""aiokafka settings from a Burrow client profile (client id, TLS, SASL) for the cluster and consumer modules."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from burrowpy.config import ClientProfile, Section

TOPIC_ALREADY_EXISTS = 36  # Kafka's error code: another instance created the topic first

# The metadata age of the cluster and consumer modules' aiokafka clients (:func:`brokers_only_client`), which
# want aiokafka's metadata for the brokers' addresses only: aiokafka refreshes it when a connection breaks, and
# those modules when the brokers they read change. So a day.
BROKERS_ONLY_METADATA_AGE_MS = 24 * 3600 * 1000

SASL_MECHANISMS = {"PLAIN": "PLAIN", "SCRAM-SHA-256": "SCRAM-SHA-256", "SCRAM-SHA-512": "SCRAM-SHA-512"}


def client_settings(profile: ClientProfile, section: Section) -> dict[str, Any]:
    """Keyword arguments for aiokafka clients. An IAM profile is refused with a config error rather than
    ignored: aiokafka has no AWS MSK IAM signer, and connecting without it would only fail later."""
    if profile.iam is not None:
        raise section.error("client-profile", f"client profile {profile.name!r} uses an iam profile; AWS MSK IAM "
                                              "authentication is not supported by burrowpy")
    settings: dict[str, Any] = {"client_id": profile.client_id}
    # aiokafka bounds connecting and each request by one timeout, so it gets the larger of the two.
    timeouts = [t for t in (profile.dial_timeout, profile.read_timeout) if t]
    if timeouts:
        settings["request_timeout_ms"] = max(timeouts) * 1000
    protocol = "PLAINTEXT"
    if profile.tls is not None:
        settings["ssl_context"] = profile.tls.client_context()
        protocol = "SSL"
    if profile.sasl is not None:
        protocol = "SASL_SSL" if profile.tls is not None else "SASL_PLAINTEXT"
        settings["sasl_mechanism"] = SASL_MECHANISMS.get(profile.sasl.mechanism.upper(), "PLAIN")
        settings["sasl_plain_username"] = profile.sasl.username
        settings["sasl_plain_password"] = profile.sasl.password
    settings["security_protocol"] = protocol
    return settings


async def create_topics(servers: list[str], settings: dict[str, Any], topics: list[Any], what: str) -> None:
    """Create aiokafka ``NewTopic``s through the admin API; one another instance created first is no error
    (TOPIC_ALREADY_EXISTS), any other refusal raises naming ``what`` the topic is for."""
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=servers, **settings)
    await admin.start()
    try:
        response = await admin.create_topics(topics)
    finally:
        await admin.close()
    for topic, code, *rest in response.topic_errors:
        if code not in (0, TOPIC_ALREADY_EXISTS):
            raise RuntimeError(f"creating {what} {topic!r} failed with error code {code}: {rest[0] if rest else ''}")


async def stop_clients(*clients: Any) -> None:
    """Stop aiokafka producers and consumers (None is skipped); a client that fails to stop is already unusable,
    and stopping the others matters more."""
    for client in clients:
        if client is not None:
            with contextlib.suppress(Exception):
                await client.stop()


class _NoTopic(list):
    """An empty topic list that is true. aiokafka's metadata refresh asks for every topic when its list of topics
    is false; this one it sends as an empty array, which (Metadata v1+) asks for none."""

    def __bool__(self) -> bool:
        return True


@functools.cache
def _brokers_only_class() -> type:
    from aiokafka import AIOKafkaClient

    if not callable(getattr(AIOKafkaClient, "_metadata_update", None)):
        raise RuntimeError("this aiokafka release refreshes its metadata otherwise (no _metadata_update): "
                           "burrowpy/coordinators/kafka_client.py must be brought up to date")

    class BrokersOnlyClient(AIOKafkaClient):  # type: ignore[misc]
        async def _metadata_update(self, cluster_metadata: Any, topics: Any) -> bool:
            if topics is not None and not topics:  # its own refresh, no topic set: the brokers alone
                topics = _NoTopic()
            return bool(await super()._metadata_update(cluster_metadata, topics))

    return BrokersOnlyClient


def brokers_only_client(servers: list[str], settings: dict[str, Any]) -> Any:
    """An aiokafka client (for :class:`~burrowpy.coordinators.codec_request.CodecRequest` and aiokafka's requests)
    whose metadata holds the brokers and no topic. aiokafka refreshes its metadata at its start, every
    ``metadata_max_age_ms`` and after every broken connection, asking for every topic when none is set: at fleet
    scale each refresh decoded tens of thousands of partitions on the event loop (half a second at 50,000), and
    the client kept them all, which the modules never read: they read topics in our codec, off the event loop
    (:mod:`~burrowpy.coordinators.codec_request`). ``fetch_all_metadata`` still reads every topic."""
    return _brokers_only_class()(bootstrap_servers=servers, **settings, metadata_max_age_ms=BROKERS_ONLY_METADATA_AGE_MS)
