"""The Kafka notifier lock's config, and the group state it carries from one sender to the next, without IO."""

from __future__ import annotations

import json

import pytest
import structlog
from hypothesis import given
from hypothesis import strategies as st

from burrowpy.config import ConfigError, parse_config
from burrowpy.daemon import Monitor
from burrowpy.notifier.decision import GroupState, Incident, LastOpen, state_from_json, state_to_json

FILE = "burrowpy.yaml"
finite = st.floats(allow_nan=False, allow_infinity=False)
states = st.builds(
    GroupState,
    st.none() | st.builds(Incident, st.text(), finite),
    st.dictionaries(st.text(), st.builds(LastOpen, finite, st.text()), max_size=3),
)


@given(states)
def test_a_group_state_survives_its_json_record(state: GroupState) -> None:
    assert state_from_json(json.loads(json.dumps(state_to_json(state)))) == state


@pytest.mark.parametrize("record", [{}, {"incident": None}, {"incident": {"id": "x"}, "last_open": {}},
                                    {"incident": None, "last_open": {"mail": {"at": "soon"}}}])
def test_a_malformed_record_raises_what_the_reader_skips(record: dict) -> None:
    with pytest.raises((KeyError, TypeError, ValueError)):
        state_from_json(record)


def configured(lock: dict, **extra: dict) -> Monitor:
    doc = {"cluster": {"local": {"class-name": "kafka", "servers": ["127.0.0.1:9092"]}},
           "notifier": {"quiet": {"class-name": "null"}}, "notifier-lock": lock, **extra}
    monitor = Monitor(parse_config(doc, FILE), structlog.get_logger())
    monitor.configure()
    return monitor


@pytest.mark.parametrize(("lock", "message"), [
    ({"class-name": "etcd", "cluster": "local"}, r"notifier-lock\.class-name: unknown notifier lock class 'etcd'"),
    ({"class-name": "kafka", "cluster": "other"}, r"notifier-lock\.cluster: names the cluster 'other', which is "
                                                  r"not configured"),
    ({"class-name": "kafka"}, r"notifier-lock\.cluster"),
    ({"class-name": "kafka", "cluster": "local", "session-timeout": 0}, r"notifier-lock\.session-timeout: must be"),
    ({"class-name": "kafka", "cluster": "local", "topic": "t", "state-topic": "t"}, r"notifier-lock\.state-topic"),
    ({"class-name": "kafka", "cluster": "local", "partitions": 3}, r"notifier-lock.*partitions"),
    ({"class-name": "zookeeper"}, r"notifier-lock\.class-name: is zookeeper, but there is no zookeeper block"),
])
def test_config_errors_name_the_key(lock: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        configured(lock)


def test_the_choice_is_described_for_the_api_and_metrics() -> None:
    monitor = configured({"class-name": "kafka", "cluster": "local", "instance": "monitor-2"})
    assert monitor.ctx.notifier.lock_kind == "kafka"
    assert monitor.ctx.notifier.describe() == {
        "lock": "kafka", "instance": "monitor-2", "sender": False, "joined": False, "since": None, "cluster": "local",
        "group": "burrowpy-notifier", "topic": "__burrowpy_notifier", "state-topic": "__burrowpy_notifier-state",
        "session-timeout": 10.0}
