"""Client quotas as Apache Kafka has them: set with AlterClientQuotas, read with DescribeClientQuotas (KIP-546),
enforced on every request (KIP-13 byte rates, KIP-124 request time, KIP-219 throttling), on topic and
partition changes (KIP-599 controller mutations) and on new connections per address (KIP-612).

An entity is a user, a client id, or both; a name of None is Kafka's ``<default>`` of that type. Which quota a
client gets follows KIP-55's order, for each key on its own: user and client id, user and default client, the
user alone, default user and the client id, both defaults, the default user, the client id alone, the default
client. The clients sharing the entity a quota was found at share one rate: a quota found at the user alone
holds all that user's clients together, one found at a client id holds that client id whoever uses it.

A rate is Kafka's: the sum over ``quota.window.num`` samples of ``quota.window.size.seconds`` each, divided by
the time they span (never less than all but one window, so one burst after a quiet spell is not taken for a
high rate). A request that takes the rate over its quota is answered at once with ``throttle_time_ms``, the
time after which the rate is back at the quota, and the connection is not read for that long.

The caller gives the time (milliseconds) and keeps the file or the cluster metadata; the one outside call here
is resolving an ip entity's name (already checked to resolve) when the quotas change.
"""

from __future__ import annotations

import ipaddress
import json
import math
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.errors import ErrorCode, KafkaError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfig: the keys an entity of users or client ids takes, and whether a value must be whole (LONG)
CLIENT_KEYS: Mapping[str, str] = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
                                  REQUEST_PERCENTAGE: "DOUBLE", CONTROLLER_MUTATION_RATE: "DOUBLE"}
IP_KEYS: Mapping[str, str] = {CONNECTION_CREATION_RATE: "INT"}
_INTEGRAL_LIMITS = {"INT": 2**31 - 1, "LONG": 2**63 - 1}
_ARTICLE = {"INT": "an", "LONG": "a"}

QUOTAS_FILE = "client-quotas.json"  # a single node's quotas, in its data dir
SENSOR_EXPIRY_MS = 3_600_000

# DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# (entity type, name or None for the default), sorted by type: one entity however a request orders it
Entity = tuple[tuple[str, str | None], ...]


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """The entity a request names; a type named twice keeps its last name, as Kafka's request reader does."""
    return tuple(sorted(dict(pairs).items()))


def entity_key(entity: Entity) -> str:
    """The entity as JSON text: how the file and the cluster metadata key it."""
    return json.dumps([list(pair) for pair in entity])


def entity_from_key(key: str) -> Entity:
    return tuple((str(kind), None if name is None else str(name)) for kind, name in json.loads(key))


def entity_text(entity: Entity) -> str:
    """The entity as Kafka's ClientQuotaEntity prints it in its messages."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{kind}={name}" for kind, name in entity) + "})"


class QuotaRefused(Exception):
    """A request Kafka answers with an error: the code and Kafka's words."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- AlterClientQuotas ----------------------------------------------------------------------------------------

Change = tuple[str, str, float | None]  # (entity key, quota key, the new value or None to remove it)


def _check_entity(entity: Entity, resolvable: Callable[[str], bool]) -> Mapping[str, str]:
    """The keys ``entity`` may have, or QuotaRefused in Kafka's words (ClientQuotaControlManager's checks);
    ``resolvable`` tells whether an ip entity's name is an address or resolves to one."""
    if not entity:
        raise QuotaRefused(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    for kind, name in entity:
        if kind not in (USER, CLIENT_ID, IP):
            raise QuotaRefused(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {kind}")
        if name == "":
            raise QuotaRefused(ErrorCode.INVALID_REQUEST, f"Empty {kind} not supported")
    types = dict(entity)
    if IP in types:
        if len(types) > 1:
            # Kafka's words, its missing space too
            raise QuotaRefused(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should"
                                                          "not be combined with User or ClientId")
        address = types[IP]
        if address is not None and not resolvable(address):
            raise QuotaRefused(ErrorCode.INVALID_REQUEST, f"{address} is not a valid IP or resolvable host.")
        return IP_KEYS
    return CLIENT_KEYS


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def _address(host: str | None) -> str | None:
    """An ip entity's address: itself if it is one, else what its name resolves to now (AlterClientQuotas
    refused names that do not resolve)."""
    if host is None:
        return None
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        try:
            return socket.gethostbyname(host)
        except (OSError, UnicodeError):
            return host


def _check_value(keys: Mapping[str, str], key: str, value: float) -> None:
    kind = keys.get(key)
    if kind is None:
        raise QuotaRefused(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not value > 0.0:
        raise QuotaRefused(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        return
    if value > _INTEGRAL_LIMITS[kind]:
        raise QuotaRefused(ErrorCode.INVALID_REQUEST,
                           f"Proposed value for {key} is too large for {_ARTICLE[kind]} {kind}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        raise QuotaRefused(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


@dataclass
class AlterOutcome:
    """What an AlterClientQuotas request does: the answer per entity, and the changes to make (all of them
    at once, as Kafka's controller writes the request's records as one batch)."""

    results: dict[Entity, tuple[ErrorCode, str | None]] = field(default_factory=dict)
    changes: list[Change] = field(default_factory=list)


# --- the store --------------------------------------------------------------------------------------------------


class ClientQuotas:
    """The quotas set, entity -> key -> value, and the rates of the clients they hold."""

    def __init__(self) -> None:
        self.entries: dict[Entity, dict[str, float]] = {}
        self._sensors: dict[tuple[str, str, str], RateSensor] = {}
        # the same tags: the throttle times given and the requests counted, sampled alike (their ratio is Kafka's
        # throttle-time, the average throttle of a request in the window, zeros included)
        self._throttles: dict[tuple[str, str, str], tuple[RateSensor, RateSensor]] = {}
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        # connection_creation_rate by address (None: the default ip entity's), names resolved as Kafka resolves them
        self._ip_quotas: dict[str | None, float] = {}

    # --- state, as the file and the cluster metadata hold it

    def to_json(self) -> dict[str, dict[str, float]]:
        return {entity_key(entity): dict(values) for entity, values in self.entries.items()}

    def replace(self, stored: Mapping[str, Mapping[str, Any]]) -> bool:
        """Take ``stored`` (:meth:`to_json`'s form) as the quotas; whether anything changed."""
        entries = {entity_from_key(key): {str(k): float(v) for k, v in values.items()}
                   for key, values in stored.items() if values}
        if entries == self.entries:
            return False
        self.entries = entries
        self._sensors.clear()  # a client's quota may now be found at another entity, with a rate of its own
        self._buckets.clear()
        self._ip_quotas = {}
        for entity, values in entries.items():
            kinds = dict(entity)
            if IP in kinds and CONNECTION_CREATION_RATE in values:
                self._ip_quotas[_address(kinds[IP])] = values[CONNECTION_CREATION_RATE]
        return True

    def apply(self, changes: Sequence[Change]) -> None:
        stored = self.to_json()
        apply_changes(stored, changes)
        self.replace(stored)

    # --- AlterClientQuotas

    def alter(self, entries: Sequence[tuple[Entity, Sequence[tuple[str, float, bool]]]],
              resolvable: Callable[[str], bool] = is_address) -> AlterOutcome:
        """Check an AlterClientQuotas request's entries against the quotas now, as Kafka's controller does: an
        entity with a refused op changes nothing; the others change. ``resolvable``: whether an ip entity's name
        is an address or resolves to one (the caller resolves names off the event loop)."""
        outcome = AlterOutcome()
        for entity, ops in entries:
            if entity in outcome.results:
                # Kafka answers for an entity once; the one named again is refused, whatever came before
                outcome.results[entity] = (ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}")
                continue
            wanted: dict[str, float | None] = {}
            duplicate = False
            for key, value, remove in ops:
                if key in wanted:
                    duplicate = True
                wanted.setdefault(key, None if remove else value)
            if duplicate:
                # Kafka records the duplicate key's refusal, then finds a result for the entity and words it so
                outcome.results[entity] = (ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}")
                continue
            try:
                keys = _check_entity(entity, resolvable)
                current = self.entries.get(entity, {})
                changes: list[Change] = []
                for key, wanted_value in wanted.items():
                    if wanted_value is None:
                        if key in current:
                            changes.append((entity_key(entity), key, None))
                        continue
                    _check_value(keys, key, wanted_value)
                    if current.get(key) != wanted_value:
                        changes.append((entity_key(entity), key, wanted_value))
            except QuotaRefused as exc:
                outcome.results[entity] = (exc.code, exc.message)
                continue
            outcome.changes.extend(changes)
            outcome.results[entity] = (ErrorCode.NONE, None)
        return outcome

    # --- DescribeClientQuotas

    def describe(self, components: Sequence[tuple[str, int, str | None]], strict: bool) -> list[tuple[Entity, dict[str, float]]]:
        """The entities a DescribeClientQuotas filter matches, with their quotas; QuotaRefused for a filter Kafka
        refuses (ClientQuotasImage.describe's checks, in its order)."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for kind, match_type, match in components:
            if not kind:
                raise QuotaRefused(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise QuotaRefused(ErrorCode.INVALID_REQUEST,
                                   f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (IP, USER, CLIENT_ID):
                raise QuotaRefused(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
            if match_type == MATCH_EXACT:
                if match is None:
                    raise QuotaRefused(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise QuotaRefused(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[kind] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise QuotaRefused(ErrorCode.INVALID_REQUEST,
                                       "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                specified.add(kind)
            else:
                raise QuotaRefused(ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}")
        named = exact.keys() | specified
        if IP in named and (USER in named or CLIENT_ID in named):
            raise QuotaRefused(ErrorCode.INVALID_REQUEST, "Invalid entity filter component combination. IP filter "
                                                          "component should not be used with user or clientId "
                                                          "filter component.")
        found = []
        for entity, values in self.entries.items():
            types = dict(entity)
            if strict and len(types) != len(named):
                continue
            if all(kind in types and types[kind] == name for kind, name in exact.items()) and specified <= types.keys():
                found.append((entity, dict(values)))
        return found

    # --- enforcement

    def quota_for(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float | None]:
        """(user tag, client id tag) of the rate ``key`` counts this client in, and the quota that holds it
        (None: none). Kafka's DefaultQuotaCallback: the tags name what the quota found is shared by."""
        if not any(key in values for values in self.entries.values()):
            return ("", client_id), None

        # KIP-55's order, each level with the tags of the rate it holds the client to
        both, user_only, client_only = (user, client_id), (user, ""), ("", client_id)
        levels: list[tuple[tuple[str, str], Entity]] = [
            (both, ((CLIENT_ID, client_id), (USER, user))),
            (both, ((CLIENT_ID, None), (USER, user))),
            (user_only, ((USER, user),)),
            (both, ((CLIENT_ID, client_id), (USER, None))),
            (both, ((CLIENT_ID, None), (USER, None))),
            (user_only, ((USER, None),)),
            (client_only, ((CLIENT_ID, client_id),)),
            (client_only, ((CLIENT_ID, None),)),
        ]
        for tags, entity in levels:
            quota = self.entries.get(entity, {}).get(key)
            if quota is not None:
                return tags, quota
        return client_only, None

    def max_in_window(self, key: str, user: str, client_id: str, window: QuotaWindow) -> float | None:
        """The most one request may count without being throttled whatever came before it (None: no quota):
        what Kafka caps a consumer's Fetch at, so that a throttled Fetch, answered empty, cannot be the next
        one's fate too."""
        quota = self.quota_for(key, user, client_id)[1]
        return None if quota is None else quota * (window.samples - 1) * window.size_ms / 1000

    def record(self, key: str, user: str, client_id: str, value: float, now_ms: int, window: QuotaWindow, *,
               bounded: bool = False) -> int:
        """Count ``value`` against the client's ``key`` quota; the throttle time in ms (0 within its quota).
        ``bounded``: at most one sample window, as Kafka bounds the request-time quota's throttle."""
        tags, quota = self.quota_for(key, user, client_id)
        if quota is None:
            return 0
        return self._record_on((key, *tags), quota, value, now_ms, window, bounded)

    def record_connection(self, host: str, now_ms: int, window: QuotaWindow) -> int:
        """Count a connection from ``host`` against its connection_creation_rate (the quota of its ``ip``
        entity, else of the default one; KIP-612): the ms to hold it before closing it, 0 to keep it."""
        quota = self._ip_quotas.get(host, self._ip_quotas.get(None))
        if quota is None:
            return 0
        return self._record_on((CONNECTION_CREATION_RATE, host, ""), quota, 1, now_ms, window, True)

    def _record_on(self, tags: tuple[str, str, str], quota: float, value: float, now_ms: int, window: QuotaWindow,
                   bounded: bool) -> int:
        sensor = self._sensors.get(tags)
        if sensor is None:
            self._forget_idle(now_ms)
            sensor = self._sensors[tags] = RateSensor()
            self._throttles[tags] = (RateSensor(), RateSensor())
        sensor.record(value, now_ms, window)
        rate, span_ms = sensor.rate(now_ms, window)
        throttle = 0 if rate <= quota else round((rate - quota) / quota * span_ms)
        if bounded:
            throttle = min(throttle, window.size_ms)
        given, requests = self._throttles[tags]
        given.record(throttle, now_ms, window)
        requests.record(1, now_ms, window)
        return throttle

    def client_figures(self, now_ms: int, window: QuotaWindow) -> list[tuple[str, str, str, float, float]]:
        """(quota key, user tag, client id tag, its rate, the average throttle in ms of its requests) of each
        client rate held to a quota: Kafka's per-client quota metrics (kafka.server:type=Produce|Fetch|Request,
        user=..., client-id=..., byte-rate / request-time and throttle-time). Connection rates are left out."""
        figures = []
        for tags, sensor in sorted(self._sensors.items()):
            if tags[0] == CONNECTION_CREATION_RATE:
                continue
            given, requests = self._throttles[tags]
            counted = requests.rate(now_ms, window)[0]
            average = given.rate(now_ms, window)[0] / counted if counted else 0.0
            figures.append((*tags, sensor.rate(now_ms, window)[0], average))
        return figures

    def unrecord(self, key: str, user: str, client_id: str, value: float, now_ms: int, window: QuotaWindow) -> None:
        """Take back what :meth:`record` counted (a throttled fetch is answered empty, so its bytes do not count)."""
        tags, quota = self.quota_for(key, user, client_id)
        sensor = self._sensors.get((key, *tags))
        if quota is not None and sensor is not None:
            sensor.record(-value, now_ms, window)

    def mutation_quota(self, user: str, client_id: str, window: QuotaWindow, *, strict: bool) -> MutationQuota:
        """One CreateTopics, CreatePartitions or DeleteTopics request's view of the client's
        controller_mutation_rate (KIP-599): ``strict`` from the versions whose clients know
        THROTTLING_QUOTA_EXCEEDED, which a partition past an exhausted quota gets."""
        tags, quota = self.quota_for(CONTROLLER_MUTATION_RATE, user, client_id)
        if quota is None:
            return MutationQuota(None, 0.0, window, strict=strict)
        bucket = self._buckets.get(tags)
        if bucket is None:
            bucket = self._buckets[tags] = TokenBucket()
        return MutationQuota(bucket, quota, window, strict=strict)

    def _forget_idle(self, now_ms: int) -> None:
        """Drop the rates of clients not seen for an hour, as Kafka expires a client's quota sensors."""
        for tags in [tags for tags, sensor in self._sensors.items() if now_ms - sensor.last_ms >= SENSOR_EXPIRY_MS]:
            del self._sensors[tags]
            del self._throttles[tags]


def apply_changes(stored: dict[str, dict[str, float]], changes: Sequence[Change]) -> None:
    """Apply AlterClientQuotas' changes to quotas in :meth:`ClientQuotas.to_json`'s form (also the cluster
    metadata's); an entity left with no quota is gone, as on Kafka."""
    for key, name, value in changes:
        values = stored.setdefault(key, {})
        if value is None:
            values.pop(name, None)
        else:
            values[name] = float(value)
        if not values:
            del stored[key]


@dataclass(frozen=True)
class QuotaWindow:
    """``quota.window.num`` samples of ``quota.window.size.seconds``."""

    samples: int
    size_ms: int


class RateSensor:
    """Kafka's Rate over a SampledStat: samples as [start ms, last event ms, sum], one spare beyond the window."""

    __slots__ = ("samples", "current", "last_ms")

    def __init__(self) -> None:
        self.samples: list[list[float]] = []
        self.current = 0
        self.last_ms = 0

    def record(self, value: float, now_ms: int, window: QuotaWindow) -> None:
        self.last_ms = now_ms
        if not self.samples:
            self.samples.append([now_ms, now_ms, 0.0])
            self.current = 0
        sample = self.samples[self.current]
        if now_ms - sample[0] >= window.size_ms:
            self.current = (self.current + 1) % (window.samples + 1)
            if self.current >= len(self.samples):
                self.samples.append([now_ms, now_ms, 0.0])
            else:
                self.samples[self.current][:] = [now_ms, now_ms, 0.0]
            sample = self.samples[self.current]
        sample[2] += value
        sample[1] = now_ms

    def rate(self, now_ms: int, window: QuotaWindow, *, simple: bool = False) -> tuple[float, int]:
        """(units per second, the span in ms it is measured over). ``simple``: Kafka's SimpleRate (replication
        throttles), whose span is since the oldest sample began, at least one window, so that a burst after a
        quiet spell counts fully."""
        expire = window.samples * window.size_ms
        for sample in self.samples:
            if now_ms - sample[1] >= expire:
                sample[:] = [now_ms, now_ms, 0.0]
        total = sum(sample[2] for sample in self.samples)
        oldest = min((sample[0] for sample in self.samples), default=now_ms)
        span = now_ms - oldest
        full = span // window.size_ms
        if simple:
            span = max(span, window.size_ms)
        elif full < window.samples - 1:
            span += (window.samples - 1 - full) * window.size_ms
        span = max(int(span), 1)
        return total / (span / 1000), span


THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class TokenBucket:
    """Kafka's TokenBucket: ``tokens`` refill at the quota per second up to a burst of the quota over the whole
    window; a mutation takes as many as it changes partitions, and may take it below zero."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self) -> None:
        self.tokens = 0.0
        self.last_ms: int | None = None  # a new bucket starts full

    def refill(self, quota: float, burst: float, now_ms: int) -> float:
        elapsed = math.inf if self.last_ms is None else now_ms - self.last_ms
        self.tokens = min(burst, self.tokens + quota * elapsed / 1000)
        self.last_ms = now_ms
        return self.tokens


class MutationQuota:
    """Kafka's strict (or permissive) ControllerMutationQuota for one request. Strict: a mutation is refused,
    THROTTLING_QUOTA_EXCEEDED, once the bucket is below zero, and the one that takes it there goes through.
    Permissive (older clients): every mutation goes through. Either way the answer carries the time the
    bucket takes to come back to zero."""

    def __init__(self, bucket: TokenBucket | None, quota: float, window: QuotaWindow, *, strict: bool) -> None:
        self.bucket = bucket
        self.quota = quota
        self.burst = quota * window.samples * window.size_ms / 1000
        self.strict = strict
        self._throttle_ms = 0
        self._at_ms = 0

    def record(self, partitions: int, now_ms: int) -> None:
        """Count ``partitions`` changed; KafkaError THROTTLING_QUOTA_EXCEEDED where the strict quota is spent."""
        if self.bucket is None:
            return
        tokens = self.bucket.refill(self.quota, self.burst, now_ms)
        if self.strict and tokens < 0:
            self._throttled(tokens, now_ms)
            raise KafkaError(ErrorCode.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE)
        self.bucket.tokens = min(self.burst, tokens - partitions)
        if not self.strict and self.bucket.tokens < 0:
            self._throttled(self.bucket.tokens, now_ms)

    def _throttled(self, tokens: float, now_ms: int) -> None:
        self._throttle_ms = round(-tokens / self.quota * 1000)
        self._at_ms = now_ms

    def throttle_ms(self, now_ms: int) -> int:
        """The throttle time for the answer: what was found, less the time since (the request may have waited)."""
        return max(0, self._throttle_ms - (now_ms - self._at_ms))
