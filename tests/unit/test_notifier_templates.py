"""Notification templates: the helper functions, the template data, error reporting, the shipped templates."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burrowpy.config import ConfigError, Section
from burrowpy.notifier.email import build_message
from burrowpy.notifier.templates import (
    TemplateRenderError,
    compile_inline,
    divide,
    formatcatchup,
    formatduration,
    formattimestamp,
    jsonencoder,
    load_template,
    make_environment,
    maxlag,
    partitioncounts,
    render,
    template_data,
    topicsbystatus,
)
from burrowpy.protocol import ConsumerGroupStatus, ConsumerOffset, PartitionStatus, Status

TEMPLATES = Path(__file__).resolve().parents[2] / "config" / "templates"
START = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC


def partition(topic: str, number: int, status: Status, lag: int, lag_seconds: float | None = None,
              method: str | None = None) -> PartitionStatus:
    return PartitionStatus(
        topic=topic,
        partition=number,
        status=status,
        current_lag=lag,
        complete=1.0,
        start=ConsumerOffset(100, 1_699_999_000_000, 1_699_999_000_000, 5),
        end=ConsumerOffset(140, 1_699_999_600_000, 1_699_999_600_000, lag),
        owner="/10.0.0.1",
        client_id="consumer-1",
        lag_seconds=lag_seconds,
        lag_seconds_method=method,
        catch_up_forecast="falling_behind" if status == Status.STOP else "catching_up",
        catch_up_seconds=None if status == Status.STOP else 720.0,
        falling_behind_per_second=340.0 if status == Status.STOP else None,
    )


def group_status(status: Status = Status.ERR, group: str = "payments") -> ConsumerGroupStatus:
    partitions = [
        partition("orders", 0, Status.STOP, 70, 3723.5, "fetch"),
        partition("orders", 1, Status.WARN, 12, 42.25, "interpolated"),
        partition("refunds", 3, Status.STOP, 9),
    ]
    return ConsumerGroupStatus(
        cluster="local",
        group=group,
        status=status,
        complete=1.0,
        partitions=partitions,
        partition_count=8,
        maxlag=partitions[0],
        totallag=91,
        max_lag_seconds=3723.5,
        catch_up_forecast="falling_behind",
        falling_behind_per_second=349.0,
    )


def data(
    status: ConsumerGroupStatus | None = None,
    incident: str = "4f6f-incident",
    start: float | None = START,
    extras: dict | None = None,
) -> dict:
    return template_data(status or group_status(), incident, start, extras or {})


def section_for(tmp_path: Path, **keys) -> Section:
    return Section(str(tmp_path / "burrowpy.yaml"), "notifier.test", keys)


def inline(source: str):
    return make_environment().from_string(source)


# --- helpers ---------------------------------------------------------------------------------------


def test_formatduration_writes_seconds_for_people():
    assert [formatduration(value) for value in (None, 0, 42.25, 59.99, 60, 185, 3723.5, 86400 * 2 + 4 * 3600 + 59)] \
        == ["-", "0.0s", "42.2s", "1m 00s", "1m 00s", "3m 05s", "1h 02m 03s", "2d 04h 00m"]
    assert render(inline("{{ result.max_lag_seconds | formatduration }}"), data()) == "1h 02m 03s"


def test_formatcatchup_says_when_or_how_fast_it_falls_behind():
    def forecast(state: str | None, seconds: float | None = None, rate: float | None = None) -> str:
        return formatcatchup(PartitionStatus("t", 0, Status.OK, 5, 1.0, catch_up_forecast=state,
                                             catch_up_seconds=seconds, falling_behind_per_second=rate))

    assert [forecast("catching_up", seconds) for seconds in (4.2, 89, 720.4, 5400, 7 * 86400)] == [
        "caught up in ~4 s", "caught up in ~89 s", "caught up in ~12 min", "caught up in ~2 h", "caught up in ~7 d"]
    assert [forecast("falling_behind", None, rate) for rate in (340.4, 10, 2.25, 0.004)] == [
        "falling behind by 340 records/s", "falling behind by 10 records/s", "falling behind by 2.2 records/s",
        "falling behind by 0.004 records/s"]
    assert [forecast(state) for state in ("keeping_pace", None)] == ["keeping pace", "-"]
    assert forecast("caught_up", 0.0) == "caught up"
    # The group's and each partition's, in a template.
    text = render(inline("{{ result | formatcatchup }}; {% for p in result.partitions %}{{ formatcatchup(p) }}; "
                         "{% endfor %}{{ result.falling_behind_per_second }}"), data())
    assert text == ("falling behind by 349 records/s; falling behind by 340 records/s; caught up in ~12 min; "
                    "falling behind by 340 records/s; 349.0")


def test_helpers_exist_as_filters_and_as_globals():
    text = render(
        inline(
            "{{ result.partitions | partitioncounts | jsonencoder }}|"
            "{{ jsonencoder(partitioncounts(result.partitions)) }}|"
            "{{ 7 | add(5) }} {{ add(7, 5) }} {{ minus(7, 5) }} {{ multiply(7, 5) }} {{ 7 | divide(2) }}"
        ),
        data(),
    )
    counts = '{"warn":1,"stop":2,"stall":0,"rewind":0,"unknown":0}'
    assert text == f"{counts}|{counts}|12 12 2 35 3"


def test_jsonencoder_uses_burrow_field_names_and_status_strings():
    encoded = json.loads(jsonencoder(group_status().partitions[:1]))
    assert encoded == [
        {
            "topic": "orders",
            "partition": 0,
            "owner": "/10.0.0.1",
            "client_id": "consumer-1",
            "status": "STOP",
            "start": {
                "offset": 100,
                "timestamp": 1_699_999_000_000,
                "observedAt": 1_699_999_000_000,
                "lag": 5,
            },
            "end": {
                "offset": 140,
                "timestamp": 1_699_999_600_000,
                "observedAt": 1_699_999_600_000,
                "lag": 70,
            },
            "current_lag": 70,
            "complete": 1.0,
            "lag_seconds": 3723.5,
            "lag_seconds_method": "fetch",
            "catch_up_forecast": "falling_behind",
            "catch_up_seconds": None,
            "falling_behind_per_second": 340.0,
        }
    ]
    assert jsonencoder({"s": Status.WARN, "q": 'a "quoted" name'}) == '{"s":"WARN","q":"a \\"quoted\\" name"}'


def test_topicsbystatus_lists_each_topic_once_per_status():
    assert topicsbystatus(group_status().partitions) == {"STOP": ["orders", "refunds"], "WARN": ["orders"]}


def test_partitioncounts_ignores_ok_and_counts_the_unexpected_as_unknown():
    parts = [
        partition("t", 0, Status.OK, 0),
        partition("t", 1, Status.STALL, 1),
        partition("t", 2, Status.REWIND, 1),
        partition("t", 3, Status.ERR, 1),
    ]
    assert partitioncounts(parts) == {"warn": 0, "stop": 0, "stall": 1, "rewind": 1, "unknown": 1}


def test_maxlag_of_a_group_without_maxlag_is_zero():
    assert maxlag(None) == 0
    assert maxlag(group_status().maxlag) == 70


@settings(deadline=None, max_examples=200)
@given(st.integers(-(10**12), 10**12), st.integers(-(10**6), 10**6).filter(bool))
def test_divide_truncates_toward_zero_like_go(a, b):
    quotient = divide(a, b)
    assert abs(quotient) == abs(a) // abs(b)
    assert quotient == 0 or (quotient < 0) == ((a < 0) != (b < 0))


def test_formattimestamp_formats_milliseconds_in_local_time():
    assert formattimestamp(1_699_999_600_000, "%Y-%m-%d %H:%M:%S") == datetime.fromtimestamp(
        1_699_999_600
    ).strftime("%Y-%m-%d %H:%M:%S")


# --- data and errors -------------------------------------------------------------------------------


def test_template_data_names_and_types():
    text = render(
        inline(
            "{{ cluster }} {{ group }} {{ id }} {{ start.isoformat() }} {{ extras.tier }}"
            "[{{ extras.missing }}] {{ result.status }} {{ result.status == 3 }} {{ result.totallag }}"
        ),
        data(extras={"tier": "gold"}),
    )
    assert text == "local payments 4f6f-incident 2023-11-14T22:13:20+00:00 gold[] ERR True 91"


def test_no_incident_means_empty_id_and_no_start():
    assert render(inline("[{{ id }}] {{ start is none }}"), data(incident="", start=None)) == "[] True"


def test_an_undefined_name_fails_loudly_with_the_template_line(tmp_path):
    # Burrow's default close template used .Id (the field is .ID) and sent "" for years.
    (tmp_path / "close.tmpl").write_text('{"ids": [\n  "{{ Id }}"\n]}\n')
    template = load_template(section_for(tmp_path, **{"template-open": "close.tmpl"}), "template-open")
    with pytest.raises(TemplateRenderError, match=r"close\.tmpl line 2: UndefinedError: 'Id' is undefined"):
        render(template, data())


def test_a_failing_expression_is_a_render_error():
    with pytest.raises(TemplateRenderError, match="line 1: ZeroDivisionError"):
        render(inline("{{ divide(1, 0) }}"), data())


def test_syntax_errors_are_config_errors_naming_file_key_and_line(tmp_path):
    (tmp_path / "bad.tmpl").write_text("Subject: x\n{% for p in result.partitions %}\n")
    with pytest.raises(
        ConfigError,
        match=r"burrowpy\.yaml: notifier\.test\.template-open: template .*bad\.tmpl "
        r"line 2: .*",
    ):
        load_template(section_for(tmp_path, **{"template-open": "bad.tmpl"}), "template-open")


def test_a_go_template_gets_a_hint(tmp_path):
    (tmp_path / "go.tmpl").write_text('{"group": "{{.Result.Group}}"}')
    with pytest.raises(ConfigError, match="Go template from Burrow"):
        load_template(section_for(tmp_path, **{"template-open": "go.tmpl"}), "template-open")


def test_missing_template_file_names_where_it_looked(tmp_path):
    with pytest.raises(
        ConfigError, match=r"template-open: template file 'nope\.tmpl' not found \(looked for "
    ):
        load_template(section_for(tmp_path, **{"template-open": "nope.tmpl"}), "template-open")


def test_relative_template_paths_are_found_next_to_the_config_file(tmp_path, monkeypatch):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "open.tmpl").write_text("{{ group }}")
    monkeypatch.chdir("/")
    template = load_template(
        section_for(tmp_path, **{"template-open": "templates/open.tmpl"}), "template-open"
    )
    assert render(template, data()) == "payments"


def test_inline_url_templates(tmp_path):
    url = compile_inline(
        section_for(tmp_path, **{"url-open": "http://h/{{ cluster }}/{{ group }}?id={{ id }}"}), "url-open"
    )
    assert render(url, data()) == "http://h/local/payments?id=4f6f-incident"
    with pytest.raises(ConfigError, match="notifier.test.url-open: bad template"):
        compile_inline(section_for(tmp_path, **{"url-open": "http://h/{{ group"}), "url-open")


# --- the shipped templates -------------------------------------------------------------------------


def shipped(name: str):
    section = Section(str(TEMPLATES / "burrowpy.yaml"), "notifier.test", {"template-open": name})
    return load_template(section, "template-open")


def test_default_http_open_is_valid_json_with_the_event():
    body = json.loads(
        render(
            shipped("default-http-open.tmpl"),
            data(extras={"api_key": "k", "app": "burrowpy", "tier": "prod"}),
        )
    )
    assert body["api_key"] == "k" and body["app"] == "burrowpy" and body["block"] is False
    (event,) = body["events"]
    assert event["id"] == "4f6f-incident"
    assert event["event"]["severity"] == "ERR"
    assert event["event"]["tier"] == "prod"
    assert event["event"]["group"] == "payments"
    assert event["event"]["start"] == "Nov 14, 2023 22:13:20 UTC"
    assert [p["topic"] for p in event["event"]["partitions"]] == ["orders", "orders", "refunds"]
    warn = json.loads(render(shipped("default-http-open.tmpl"), data(group_status(Status.WARN))))
    assert warn["events"][0]["event"]["severity"] == "WARN"


def test_default_http_close_sends_the_incident_id():
    body = json.loads(render(shipped("default-http-close.tmpl"), data(group_status(Status.OK))))
    assert body == {"api_key": "", "app": "", "block": False, "ids": ["4f6f-incident"]}


def test_group_names_with_quotes_keep_the_json_valid():
    name = 'we"ird\\group'
    awkward = data(group_status(group=name))
    assert (
        json.loads(render(shipped("default-http-open.tmpl"), awkward))["events"][0]["event"]["group"] == name
    )
    for slack in ("default-slack-open.tmpl", "default-slack-close.tmpl"):
        (attachment,) = json.loads(render(shipped(slack), awkward))["attachments"]
        assert attachment["fields"][0] == {"title": "Group", "value": name, "short": False}


def test_slack_templates_are_attachments():
    opened = json.loads(render(shipped("default-slack-open.tmpl"), data()))
    closed = json.loads(render(shipped("default-slack-close.tmpl"), data(group_status(Status.OK))))
    assert opened["attachments"][0]["color"] == "danger"
    assert closed["attachments"][0]["color"] == "good"
    fields = {f["title"]: f["value"] for f in opened["attachments"][0]["fields"]}
    assert fields == {
        "Group": "payments",
        "Cluster": "local",
        "Status": "ERR",
        "Total Lag": "91",
        "Time Lag": "1h 02m 03s",
        "Catch-up": "falling behind by 349 records/s",
        "Start": datetime.fromtimestamp(START, UTC).isoformat(),
    }


def test_default_email_open_lists_the_partitions():
    text = render(shipped("default-email-open.tmpl"), data())
    message = build_message(text, "burrow@example.com", ["ops@example.com"])
    assert message["Subject"] == "[burrowpy] Kafka consumer lag alert: payments on local is ERR"
    body = message.get_content()
    assert "Errors:   3 partitions have problems" in body
    assert "Oldest unconsumed record: 1h 02m 03s old" in body.splitlines()
    assert "Catch-up forecast: falling behind by 349 records/s" in body.splitlines()
    assert (
        "          STOP orders:0 lag 70 (1h 02m 03s) (1699999000000, 100, 5) -> (1699999600000, 140, 70)"
        in body.splitlines()
    )
    assert (
        "          WARN orders:1 lag 12 (42.2s) (1699999000000, 100, 5) -> (1699999600000, 140, 12)"
        in body.splitlines()
    )
    assert (
        "          STOP refunds:3 lag 9 (-) (1699999000000, 100, 5) -> (1699999600000, 140, 9)"
        in body.splitlines()
    )


def test_a_share_partitions_records_in_flight_reach_the_templates():
    status = group_status()
    status.kind = "share"
    status.partitions[0].in_flight = 4
    body = build_message(render(shipped("default-email-open.tmpl"), data(status)), "burrow@example.com",
                         ["ops@example.com"]).get_content()
    assert "          STOP orders:0 lag 70 (1h 02m 03s), 4 in flight (1699999000000, 100, 5) -> " \
           "(1699999600000, 140, 70)" in body.splitlines()
    assert "          WARN orders:1 lag 12 (42.2s) (1699999000000, 100, 5) -> (1699999600000, 140, 12)" \
           in body.splitlines()  # unknown: nothing said
    encoded = render(inline("{{ result.partitions | jsonencoder }}"), data(status))
    assert '"in_flight":4' in encoded and encoded.count("in_flight") == 1


def test_default_email_close():
    text = render(shipped("default-email-close.tmpl"), data(group_status(Status.OK)))
    message = build_message(text, "burrow@example.com", ["ops@example.com"])
    assert message["Subject"] == "[burrowpy] Resolved: payments on local is OK again"
    assert "Incident: 4f6f-incident" in message.get_content()
