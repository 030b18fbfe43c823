"""broker.quotas: Kafka's quota precedence (KIP-55), DescribeClientQuotas' filters, AlterClientQuotas' checks
(Kafka's ClientQuotaControlManager and ClientQuotasImage, in their words) and the rate and throttle time of
Kafka's Rate over sample windows, with the clock given."""

from __future__ import annotations

import pytest

from broker.errors import ErrorCode, KafkaError
from broker.quotas import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    ClientQuotas,
    QuotaRefused,
    QuotaWindow,
    entity_of,
)

WINDOW = QuotaWindow(samples=11, size_ms=1000)


def quotas_with(*entries: tuple[list[tuple[str, str | None]], float]) -> ClientQuotas:
    quotas = ClientQuotas()
    outcome = quotas.alter([(entity_of(entity), [(PRODUCER_BYTE_RATE, value, False)]) for entity, value in entries])
    assert all(code == ErrorCode.NONE for code, _ in outcome.results.values()), outcome.results
    quotas.apply(outcome.changes)
    return quotas


# --- precedence ---------------------------------------------------------------------------------------------------

LEVELS = [
    ([(USER, "alice"), (CLIENT_ID, "app")], 1.0, ("alice", "app")),
    ([(USER, "alice"), (CLIENT_ID, None)], 2.0, ("alice", "app")),
    ([(USER, "alice")], 3.0, ("alice", "")),
    ([(USER, None), (CLIENT_ID, "app")], 4.0, ("alice", "app")),
    ([(USER, None), (CLIENT_ID, None)], 5.0, ("alice", "app")),
    ([(USER, None)], 6.0, ("alice", "")),
    ([(CLIENT_ID, "app")], 7.0, ("", "app")),
    ([(CLIENT_ID, None)], 8.0, ("", "app")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_quota_applies_in_kip_55_order(level):
    """With every level from ``level`` down set, the one at ``level`` holds user alice's client app, and its
    rate is shared by what the entity names (a user quota holds all the user's clients together)."""
    quotas = quotas_with(*[(entity, value) for entity, value, _ in LEVELS[level:]])
    assert quotas.quota_for(PRODUCER_BYTE_RATE, "alice", "app") == (LEVELS[level][2], LEVELS[level][1])


def test_no_quota_for_a_key_nobody_set():
    quotas = quotas_with(([(USER, "alice")], 10.0))
    assert quotas.quota_for("consumer_byte_rate", "alice", "app")[1] is None
    assert quotas.quota_for(PRODUCER_BYTE_RATE, "bob", "app")[1] is None


# --- DescribeClientQuotas -----------------------------------------------------------------------------------------

def described(quotas: ClientQuotas, *components: tuple[str, int, str | None], strict: bool = False) -> set:
    return {entity for entity, _ in quotas.describe(list(components), strict)}


def test_describe_filters_exact_default_and_specified_strict_or_not():
    quotas = quotas_with(([(USER, "alice")], 1.0), ([(USER, None)], 2.0), ([(USER, "alice"), (CLIENT_ID, "app")], 3.0),
                         ([(CLIENT_ID, "app")], 4.0))
    alice, default_user = entity_of([(USER, "alice")]), entity_of([(USER, None)])
    both, app = entity_of([(USER, "alice"), (CLIENT_ID, "app")]), entity_of([(CLIENT_ID, "app")])
    assert described(quotas) == {alice, default_user, both, app}
    assert described(quotas, strict=True) == set()
    assert described(quotas, (USER, 0, "alice")) == {alice, both}
    assert described(quotas, (USER, 0, "alice"), strict=True) == {alice}
    assert described(quotas, (USER, 1, None)) == {default_user}
    assert described(quotas, (USER, 2, None)) == {alice, default_user, both}
    assert described(quotas, (USER, 2, None), (CLIENT_ID, 2, None), strict=True) == {both}
    assert quotas.describe([(USER, 0, "alice")], True) == [(alice, {PRODUCER_BYTE_RATE: 1.0})]


@pytest.mark.parametrize(("components", "code", "message"), [
    ([("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([(USER, 2, None), (USER, 0, "a")], ErrorCode.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("topic", 2, None)], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type topic"),
    ([(USER, 0, None)], ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([(USER, 1, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([(USER, 2, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([(USER, 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
    ([("ip", 2, None), (USER, 2, None)], ErrorCode.INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used with user or clientId "
     "filter component."),
])
def test_describe_refuses_what_kafka_refuses(components, code, message):
    with pytest.raises(QuotaRefused) as refused:
        ClientQuotas().describe(components, False)
    assert (refused.value.code, refused.value.message) == (code, message)


# --- AlterClientQuotas --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("entity", "key", "value", "message"), [
    ([], PRODUCER_BYTE_RATE, 1.0, "Invalid empty client quota entity"),
    ([("topic", "t")], PRODUCER_BYTE_RATE, 1.0, "Unhandled client quota entity type: topic"),
    ([(USER, "")], PRODUCER_BYTE_RATE, 1.0, "Empty user not supported"),
    ([(USER, "a")], "bogus_rate", 1.0, "Invalid configuration key bogus_rate"),
    ([(USER, "a")], PRODUCER_BYTE_RATE, 0.0, "Quota producer_byte_rate must be greater than 0"),
    ([(USER, "a")], PRODUCER_BYTE_RATE, 12.5, "producer_byte_rate cannot be a fractional value."),
    ([(USER, "a")], PRODUCER_BYTE_RATE, 1e19, "Proposed value for producer_byte_rate is too large for a LONG."),
    ([("ip", "1.2.3.4"), (USER, "a")], "connection_creation_rate", 1.0,
     "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
    ([("ip", "1.2.3.4")], PRODUCER_BYTE_RATE, 1.0, "Invalid configuration key producer_byte_rate"),
    ([("ip", "no-such-host.invalid")], "connection_creation_rate", 1.0,
     "no-such-host.invalid is not a valid IP or resolvable host."),
])
def test_alter_refuses_what_kafka_refuses_and_changes_nothing(entity, key, value, message):
    quotas = ClientQuotas()
    outcome = quotas.alter([(entity_of(entity), [(key, value, False)])])
    assert outcome.results == {entity_of(entity): (ErrorCode.INVALID_REQUEST, message)}
    assert outcome.changes == []


def test_alter_sets_changes_and_removes_each_entity_on_its_own():
    quotas = quotas_with(([(CLIENT_ID, "app")], 100.0))
    app, bad = entity_of([(CLIENT_ID, "app")]), entity_of([(USER, "x")])
    outcome = quotas.alter([(app, [(PRODUCER_BYTE_RATE, 0.0, True), ("request_percentage", 50.5, False)]),
                            (bad, [(PRODUCER_BYTE_RATE, -1.0, False)])])
    assert outcome.results[app] == (ErrorCode.NONE, None)
    assert outcome.results[bad][0] == ErrorCode.INVALID_REQUEST
    quotas.apply(outcome.changes)
    assert quotas.entries == {app: {"request_percentage": 50.5}}
    # removing the last quota of an entity removes the entity; removing what is not there changes nothing
    quotas.apply(quotas.alter([(app, [("request_percentage", 0.0, True), (PRODUCER_BYTE_RATE, 0.0, True)])]).changes)
    assert quotas.entries == {}


def test_an_entity_or_key_named_twice_is_refused_as_kafka_words_it():
    quotas = ClientQuotas()
    app = entity_of([(CLIENT_ID, "app")])
    twice = quotas.alter([(app, [(PRODUCER_BYTE_RATE, 1.0, False), (PRODUCER_BYTE_RATE, 2.0, False)])])
    assert twice.results == {app: (ErrorCode.INVALID_REQUEST,
                                   "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app})")}
    assert twice.changes == []


# --- rates and throttle times -------------------------------------------------------------------------------------

def test_throttle_time_is_what_brings_the_rate_back_to_the_quota():
    """100 B/s over eleven 1 s windows: a first request's rate is taken over ten seconds at least, so 1000 bytes
    pass; 2000 bytes more at once make the rate 300 B/s, and (300 - 100) / 100 of the 10 s window is 20 s."""
    quotas = quotas_with(([(CLIENT_ID, "app")], 100.0))
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "app", 1000, 0, WINDOW) == 0
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "app", 2000, 0, WINDOW) == 20_000
    # the window slides: 30 s later the old samples are gone and the client is within its quota again
    assert quotas.record(PRODUCER_BYTE_RATE, "u", "app", 500, 30_000, WINDOW) == 0


def test_the_client_figures_are_its_rate_and_the_average_throttle_of_its_requests():
    """Kafka's byte-rate and throttle-time of a client: two requests, throttled 0 and 20,000 ms, average 10,000;
    the rate is the one the throttle was computed from."""
    quotas = quotas_with(([(CLIENT_ID, "app")], 100.0))
    assert quotas.client_figures(0, WINDOW) == []
    quotas.record(PRODUCER_BYTE_RATE, "u", "app", 1000, 0, WINDOW)
    quotas.record(PRODUCER_BYTE_RATE, "u", "app", 2000, 0, WINDOW)
    assert quotas.client_figures(0, WINDOW) == [(PRODUCER_BYTE_RATE, "", "app", 300.0, 10_000.0)]


def test_a_held_client_converges_on_its_quota():
    """A client that sends 1000 bytes whenever it may (after each throttle) averages the quota."""
    quotas = quotas_with(([(CLIENT_ID, "app")], 1000.0))
    now, sent = 0, 0
    while now < 120_000:
        sent += 1000
        now += max(quotas.record(PRODUCER_BYTE_RATE, "u", "app", 1000, now, WINDOW), 10)
    assert 0.95 <= sent / (now / 1000) / 1000 <= 1.1


def test_the_request_time_throttle_is_bounded_by_one_window_and_other_clients_are_apart():
    quotas = ClientQuotas()
    quotas.apply(quotas.alter([(entity_of([(USER, None)]), [("request_percentage", 10.0, False)])]).changes)
    assert quotas.record("request_percentage", "alice", "a", 5000, 0, WINDOW, bounded=True) == WINDOW.size_ms
    # a user quota at the default user: each user has a rate of its own
    assert quotas.record("request_percentage", "bob", "a", 50, 0, WINDOW, bounded=True) == 0


def test_an_unrecorded_fetch_does_not_count():
    quotas = ClientQuotas()
    quotas.apply(quotas.alter([(entity_of([(CLIENT_ID, "c")]), [("consumer_byte_rate", 100.0, False)])]).changes)
    assert quotas.record("consumer_byte_rate", "u", "c", 5000, 0, WINDOW) > 0
    quotas.unrecord("consumer_byte_rate", "u", "c", 5000, 0, WINDOW)
    assert quotas.record("consumer_byte_rate", "u", "c", 900, 0, WINDOW) == 0
    assert quotas.max_in_window("consumer_byte_rate", "u", "c", WINDOW) == 1000


def test_controller_mutations_draw_on_a_token_bucket_strictly_or_not():
    """controller_mutation_rate 1 per second over 11 windows: a burst of 11 partitions, then the bucket refills at
    one a second. Strict (new clients): the mutation that empties the bucket goes through, the next is refused
    with the time the bucket takes back to zero; permissive (old clients): everything goes through, throttled."""
    quotas = ClientQuotas()
    quotas.apply(quotas.alter([(entity_of([(CLIENT_ID, "c")]), [("controller_mutation_rate", 1.0, False)])]).changes)
    strict = quotas.mutation_quota("u", "c", WINDOW, strict=True)
    strict.record(10, 0)
    strict.record(10, 0)  # the bucket had 1 left: it goes through, to -9
    assert strict.throttle_ms(0) == 0
    with pytest.raises(KafkaError) as refused:
        strict.record(1, 1000)  # refilled by one: -8
    assert (refused.value.code, refused.value.message) == (ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                                                           "The throttling quota has been exceeded.")
    assert strict.throttle_ms(1000) == 8000
    assert strict.throttle_ms(3000) == 6000  # less what the request waited since
    permissive = quotas.mutation_quota("u", "c", WINDOW, strict=False)
    permissive.record(5, 1000)
    assert permissive.throttle_ms(1000) == 13_000
    # without a quota nothing is counted
    free = quotas.mutation_quota("u", "other", WINDOW, strict=True)
    free.record(10**6, 0)
    assert free.throttle_ms(0) == 0


def test_connections_count_against_their_addresss_quota_or_the_default_ip_one():
    quotas = ClientQuotas()
    quotas.apply(quotas.alter([(entity_of([("ip", "10.0.0.1")]), [("connection_creation_rate", 1.0, False)]),
                               (entity_of([("ip", None)]), [("connection_creation_rate", 5.0, False)])]).changes)
    window = QuotaWindow(samples=2, size_ms=1000)
    assert [quotas.record_connection("10.0.0.1", 0, window) for _ in range(3)] == [0, 1000, 1000]
    assert [quotas.record_connection("10.0.0.9", 0, window) for _ in range(6)] == [0] * 5 + [200]
