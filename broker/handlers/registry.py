"""Where API handlers register themselves, and what they are given.

A handler is ``async def handle(ctx: RequestContext, request: dict) -> dict | None``: it receives the
decoded request body and returns the response body (``None`` means no response is sent, e.g. Produce with
acks=0). Handler modules register with ``@handler(ApiKey.X)`` and are imported by ``broker.handlers``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from broker.handlers.services import Services
from broker.security.acl import ANONYMOUS, CLUSTER_NAME, Operation, ResourceType
from broker.security.broker_login import BrokerIdentity


@dataclass(slots=True)
class RequestContext:
    services: Services
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    client_host: str
    listener: str = "PLAINTEXT"  # the listener the request came in on: Metadata answers with its addresses
    api_versions: dict[int, tuple[int, int]] | None = None  # what this listener serves, if not the broker's
    principal: str = ANONYMOUS  # who is asking (broker.security.acl): User:<SASL user or certificate subject>
    peer_broker: BrokerIdentity | None = None  # the broker the connection proved it is (broker_login)

    def from_cluster_broker(self, replica_id: int | None = None) -> bool:
        """Whether the request may do what only brokers do to each other (follower fetches, transaction markers):
        it came over the inter-broker listener, on a connection that proved itself a broker's, whose broker is
        still registered and unfenced at the broker epoch it proved (KIP-903's idea), and that speaks for itself
        (``replica_id``). With an authorizer the principal also needs CLUSTER_ACTION, as in Kafka."""
        peer = self.peer_broker
        return (peer is not None and self.listener == self.services.config.inter_broker_listener
                and replica_id in (None, peer.node_id) and self.services.cluster.broker_epoch(peer.node_id) == peer.epoch
                and self.allowed(Operation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME))

    def quota_client(self) -> tuple[str, str]:
        """(user, client id) as client quotas know the client: the principal's name (ANONYMOUS when it has
        not logged in) and its client id ("" when it sends none)."""
        return self.principal.partition(":")[2], self.client_id or ""

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether the principal may do ``operation`` on the resource (always, without an authorizer)."""
        authorizer = self.services.authorizer
        return authorizer is None or authorizer.authorize(self.principal, self.client_host, operation,
                                                          resource_type, name)

    def allowed_on_any(self, operation: Operation, resource_type: ResourceType) -> bool:
        """Whether the principal may do ``operation`` on some resource of the type."""
        authorizer = self.services.authorizer
        return authorizer is None or authorizer.authorize_any(self.principal, self.client_host, operation,
                                                              resource_type)

    def operations(self, resource_type: ResourceType, name: str, everything: int) -> int:
        """The authorized-operations bit field of a resource (``everything`` without an authorizer)."""
        authorizer = self.services.authorizer
        if authorizer is None:
            return everything
        return authorizer.authorized_operations(self.principal, self.client_host, resource_type, name)


# a handler's answer: a plain dict or a TypedDict of broker.protocol.responses
Handler = Callable[[RequestContext, dict[str, Any]], Awaitable[Mapping[str, Any] | None]]

HANDLERS: dict[int, Handler] = {}


def handler(api_key: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        if api_key in HANDLERS:
            raise RuntimeError(f"two handlers for api key {api_key}")
        HANDLERS[api_key] = fn
        return fn

    return register
