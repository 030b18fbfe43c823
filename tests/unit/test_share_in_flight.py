"""Share-partitions' in-flight counts from the brokers' JMX exporters (burrowpy.coordinators.broker_metrics):
the exporter's text and the ``broker-metrics`` key (scrapes: tests/integration/test_share_in_flight_scrape.py)."""

from __future__ import annotations

import pytest

from broker.config_loading import ConfigError, Section
from burrowpy.config import http_urls
from burrowpy.coordinators.broker_metrics import IN_FLIGHT_METRIC, jmx_unquote, parse_in_flight

# What the exporter with config/kafka-share-jmx-exporter.yml serves, among the JVM's own series
EXPORTED = f"""\
# HELP jvm_threads_current Current thread count of a JVM
# TYPE jvm_threads_current gauge
jvm_threads_current 93.0
# HELP {IN_FLIGHT_METRIC} Records of the share-partition acquired by a share consumer and not yet acknowledged
# TYPE {IN_FLIGHT_METRIC} gauge
{IN_FLIGHT_METRIC}{{group="workers",partition="0",topic="jobs"}} 7.0
{IN_FLIGHT_METRIC}{{group="workers",partition="1",topic="jobs"}} 0.0
{IN_FLIGHT_METRIC}{{group="other",partition="0",topic="jobs"}} 2.0
"""


def test_the_exporters_text_gives_the_count_per_group_topic_and_partition():
    assert parse_in_flight(EXPORTED) == {("workers", "jobs", 0): 7, ("workers", "jobs", 1): 0, ("other", "jobs", 0): 2}
    assert parse_in_flight("# TYPE up gauge\nup 1.0\n") == {}


def test_names_kafka_quoted_in_the_mbean_name_are_the_groups_own():
    # Kafka quotes a tag value holding a character JMX reserves (Sanitizer.jmxSanitize, ObjectName.quote)
    text = f'{IN_FLIGHT_METRIC}{{group="\\"team:a,b\\"",partition="0",topic="jobs"}} 3.0\n'
    assert parse_in_flight(text) == {("team:a,b", "jobs", 0): 3}
    assert jmx_unquote('"a\\"b\\\\c\\nd\\*"') == 'a"b\\c\nd*'
    assert jmx_unquote("plain") == "plain" and jmx_unquote('"') == '"'


@pytest.mark.parametrize(("text", "message"), [
    (f'{IN_FLIGHT_METRIC}{{group="g",topic="t"}} 1.0\n', "without group, topic and partition"),
    (f'{IN_FLIGHT_METRIC}{{group="g",topic="t",partition="x"}} 1.0\n', "without group, topic and partition"),
    (f'{IN_FLIGHT_METRIC}{{group="g",topic="t",partition="0"}} -1.0\n', "not a count"),
    (f'{IN_FLIGHT_METRIC}{{group="g",topic="t",partition="0"}} NaN\n', "not a count"),
    ("<html>not found</html>\n", None),
])
def test_text_that_is_not_the_exporters_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_in_flight(text)


def section(value: object) -> Section:
    return Section("burrowpy.yaml", "cluster.local", {"broker-metrics": value})


def test_the_key_takes_http_urls():
    urls = ["http://kafka-1:7071/metrics", "https://kafka-2.example:7071/metrics"]
    assert http_urls(section(urls), "broker-metrics") == urls
    assert http_urls(section("http://a:1/metrics, http://b:2/metrics"), "broker-metrics") == \
        ["http://a:1/metrics", "http://b:2/metrics"]
    assert http_urls(Section("burrowpy.yaml", "cluster.local", {}), "broker-metrics") == []


@pytest.mark.parametrize(("value", "message"), [
    (["kafka-1:7071"], "'kafka-1:7071' is not an http:// or https:// URL with a host"),
    (["ftp://kafka-1/metrics"], "is not an http:// or https:// URL"),
    (["http:///metrics"], "is not an http:// or https:// URL with a host"),
    (["http://kafka-1:99999/metrics"], "is not a URL"),
    (["http://a:1/metrics", "http://a:1/metrics"], "lists http://a:1/metrics more than once"),
    ({"url": "http://a:1/"}, "expected a list of strings"),
])
def test_a_bad_key_names_the_file_and_key(value, message):
    with pytest.raises(ConfigError) as caught:
        http_urls(section(value), "broker-metrics")
    assert caught.value.file == "burrowpy.yaml" and caught.value.path == "cluster.local.broker-metrics"
    assert message in caught.value.message
