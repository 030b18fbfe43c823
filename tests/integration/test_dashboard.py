"""The dashboard in a real browser (Debian's chromium through chromedriver and selenium) against
`burrowpy demo`, and the Grafana dashboard and Prometheus alert rules of config/ against the same demo's
/metrics and promtool.

One demo serves the whole module. Its groups reach their statuses within a minute (demo-stopped turns
ERR after about 30 s), so the status test is the slow one and the others mostly reuse its wait.
Screenshots of the main pages go to build/screenshots/ (1280x800 and a phone's 390x844).
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from browser_support import chromium
from harness import BURROWPY, ROOT, Scrape, free_port, set_quota, wait_until
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

BROKER_METRICS_PORT = free_port()
BROKER_CONFIG = {"metrics.listen": f"127.0.0.1:{BROKER_METRICS_PORT}"}

SCREENSHOTS = ROOT / "build" / "screenshots"
DEMO_STATUSES = {"demo-healthy": "OK", "demo-lagging": "WARN", "demo-stopped": "ERR"}
DEMO_BROKER = f"127.0.0.1:{free_port()}"
# A figure of fmtSeconds in app.js ("4.2 s", "33 s", "2 m 5 s", "1 h 3 m", "2 d 1 h").
SECONDS_FIGURE = r"(\d+(\.\d)? s|\d+ [mhd] \d+ [smh])"
DASH = "\u2014"
# fmtCatchUp in app.js for a group that falls behind ("falling behind by 25 records/s", "... by 8.3 records/s").
FALLING_BEHIND = r"falling behind by \d+(\.\d+)? records/s"


def get(url: str, accept: str = "application/json") -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    data = tmp_path_factory.mktemp("dashboard-demo")
    proc = subprocess.Popen([BURROWPY, "demo", "--http", f"127.0.0.1:{port}", "--data-dir", str(data / "broker"),
                             "--broker", DEMO_BROKER, "--duration", "600"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        first_line = proc.stdout.readline()
        assert first_line.strip() == f"burrowpy demo dashboard: {base}/ui/", first_line
        yield base
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


@pytest.fixture(scope="module")
def browser():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as driver:
        yield driver


def group_rows(browser) -> dict[str, dict[str, str]]:
    """The group list as shown, in its order: group -> status, total lag and time lag texts."""
    rows = browser.execute_script("""
        return [...document.querySelectorAll("#groups tbody tr[data-group]")].map((tr) => [tr.dataset.group,
          {status: tr.querySelector(".status .badge").textContent, lag: tr.querySelector(".lag").textContent,
           seconds: tr.querySelector(".lag-seconds").textContent}]);""")
    return dict(rows)


def screenshot(browser, name: str) -> Path:
    """Save the page as build/screenshots/NAME.png, once it shows no value the page failed to format."""
    text = browser.find_element("tag name", "body").text
    assert not re.search(r"\[object |undefined|NaN|null", text), text
    path = SCREENSHOTS / f"{name}.png"
    assert browser.save_screenshot(str(path)), path
    return path


def test_a_browser_at_root_lands_on_the_dashboard_api_clients_keep_burrows_answer(demo, browser):
    browser.get(demo + "/")
    assert browser.current_url == demo + "/ui/"
    wait_until(lambda: browser.find_element("css selector", "h1").text == "Consumer groups", 30,
               message="the group list")
    status, body = get(demo + "/", accept="*/*")
    assert (status, body) == (404, '{"error":true,"message":"invalid request type","result":{}}\n')
    status, body = get(demo + "/v3/kafka")
    assert status == 200 and json.loads(body)["clusters"] == ["local"]


def test_group_list_shows_the_demo_statuses_and_their_changes_without_a_reload(demo, browser):
    browser.get(demo + "/ui/#/groups")
    browser.execute_script("window.stillTheSamePage = true;")
    seen: dict[str, list[str]] = {group: [] for group in DEMO_STATUSES}

    def demo_statuses_shown() -> bool:
        rows = group_rows(browser)
        for group in DEMO_STATUSES:
            status = rows.get(group, {}).get("status")
            if status and (not seen[group] or seen[group][-1] != status):
                seen[group].append(status)
        return all(rows.get(group, {}).get("status") == want for group, want in DEMO_STATUSES.items())

    wait_until(demo_statuses_shown, 150, interval=0.5, message=f"OK/WARN/ERR on the page (seen {seen})")
    # The page was never reloaded, and at least one group changed status in front of it.
    assert browser.execute_script("return window.stillTheSamePage === true;")
    assert any(len(statuses) > 1 for statuses in seen.values()), seen
    rows = group_rows(browser)
    api = json.loads(get(demo + "/v3/kafka/local/consumer/demo-lagging/status")[1])["status"]
    assert api["max_lag_seconds"] is not None
    for group in DEMO_STATUSES:
        assert int(rows[group]["lag"].replace(",", "")) >= 0
        assert re.fullmatch(SECONDS_FIGURE, rows[group]["seconds"]), rows[group]
    screenshot(browser, "groups")


def test_filter_sort_and_deep_link(demo, browser):
    browser.get(demo + "/ui/#/groups")
    wait_until(lambda: len(group_rows(browser)) >= 3, 30, message="the group list")
    field = browser.find_element("id", "filter")
    field.send_keys("lagg")
    wait_until(lambda: list(group_rows(browser)) == ["demo-lagging"], 10, message="the filtered list")
    assert "q=lagg" in browser.current_url
    browser.find_element("css selector", "#groups th[data-key='totallag']").click()
    assert "sort=totallag" in browser.current_url and "dir=desc" in browser.current_url
    # The address opens the same view from scratch.
    link = browser.current_url
    browser.get("about:blank")
    browser.get(link)
    wait_until(lambda: list(group_rows(browser)) == ["demo-lagging"], 30, message="the deep-linked filtered list")
    assert browser.find_element("id", "filter").get_attribute("value") == "lagg"
    field = browser.find_element("id", "filter")
    field.clear()
    field.send_keys("demo")
    wait_until(lambda: len(group_rows(browser)) == 3, 10, message="three demo groups")
    lags = [int(row["lag"].replace(",", "")) for row in group_rows(browser).values()]
    assert lags == sorted(lags, reverse=True)


def chart_pixels(browser, chart_id: str, rgb: tuple[int, int, int]) -> int:
    """Pixels of the chart's canvas within a small distance of the series colour."""
    return browser.execute_script("""
        const [id, r, g, b] = arguments;
        const canvas = document.querySelector(`#${id} canvas`);
        const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
        let count = 0;
        for (let i = 0; i < data.length; i += 4) {
          if (data[i + 3] > 200 && Math.abs(data[i] - r) + Math.abs(data[i + 1] - g) + Math.abs(data[i + 2] - b) < 60) {
            count++;
          }
        }
        return count;""", chart_id, *rgb)


def test_group_page_draws_its_charts_and_partitions(demo, browser):
    browser.get(demo + "/ui/#/group/local/demo-lagging")

    def charted() -> bool:
        points = browser.execute_script("""return ["chart-lag", "chart-lag-seconds", "chart-window"].map(
            (id) => Number(document.getElementById(id).dataset.points || 0));""")
        return all(count >= 3 for count in points)

    wait_until(charted, 60, interval=0.5, message="three points in each chart")

    def lag_points() -> int:
        return int(browser.find_element("id", "chart-lag").get_attribute("data-points"))

    # The next sample joins the chart without a reload (the page asks only for what is new).
    drawn = lag_points()
    wait_until(lambda: lag_points() > drawn, 30, interval=0.5, message="a new sample in the lag chart")
    first_series = (0x2C, 0x5F, 0xD6)
    for chart in ("chart-lag", "chart-lag-seconds", "chart-window"):
        assert chart_pixels(browser, chart, first_series) > 50, chart
    rows = browser.find_elements("css selector", "#view table tbody tr[data-partition]")
    assert len(rows) == 3
    for row in rows:
        cells = [cell.text for cell in row.find_elements("css selector", "td")]
        topic, partition, status, owner, client_id, committed, log_end, lag, seconds, catch_up, _ = cells
        assert (topic, status) == ("demo-events", "WARN")
        assert owner != DASH and client_id != DASH
        assert int(log_end.replace(",", "")) - int(committed.replace(",", "")) >= 0
        assert int(lag.replace(",", "")) > 0
        # The figure, then how it was found.
        assert re.fullmatch(SECONDS_FIGURE + r"\s*(fetch|interpolated|caught_up)", seconds), seconds
        # It reads 5 records of each partition every 3 s while 10/s arrive on each.
        assert re.fullmatch(FALLING_BEHIND, catch_up), catch_up
    cards = dict(card.text.split("\n") for card in browser.find_elements("css selector", ".cards .card"))
    assert re.fullmatch(FALLING_BEHIND, cards["Catch-up"]), cards
    screenshot(browser, "group")


def test_an_unknown_group_shows_notfound_and_dashes_for_missing_figures(demo, browser):
    browser.get(demo + "/ui/#/group/local/nobody-here")
    wait_until(lambda: browser.find_elements("css selector", "h1 .badge[data-status='NOTFOUND']"), 30,
               message="the NOTFOUND badge")
    cards = dict(card.text.split("\n") for card in browser.find_elements("css selector", ".cards .card"))
    assert (cards["Max time lag"], cards["Catch-up"], cards["Most lagging"]) == (DASH, DASH, DASH)
    assert browser.find_element("css selector", "#view table tbody").text == "The monitor does not know this group."


def test_clusters_and_topics_pages(demo, browser):
    browser.get(demo + "/ui/#/clusters")
    wait_until(lambda: "kafka" in browser.find_element("css selector", ".cluster[data-cluster='local']").text, 30,
               message="the cluster card")
    # the demo probes its broker: the card shows the probe's figures for broker 1
    wait_until(lambda: "100 %" in browser.find_element("css selector", ".cluster .probes tr[data-broker='1']").text,
               30, message="the probe row of the demo's broker")
    screenshot(browser, "clusters")
    browser.get(demo + "/ui/#/topics")
    wait_until(lambda: browser.find_elements("css selector", "tr[data-topic='demo-events']"), 30,
               message="the topic list")
    assert browser.find_element("css selector", ".sub").text == "cluster local"
    row = browser.find_element("css selector", "tr[data-topic='demo-events']").text
    assert all(group in row for group in DEMO_STATUSES), row
    screenshot(browser, "topics")
    browser.find_element("link text", "demo-events").click()
    wait_until(lambda: len(browser.find_elements("css selector", "tr[data-partition]")) == 3, 30,
               message="the topic's partitions")
    assert browser.current_url.endswith("#/topic/local/demo-events")
    screenshot(browser, "topic")

    # a topic under its min.insync.replicas (2, with one replica on the demo's one broker) is shown unhealthy
    # in the error colour, in the list, the cluster's summary and on its page; the healthy one is not
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": DEMO_BROKER})
    admin.create_topics([NewTopic("demo-under-min-isr", 1, 1, config={"min.insync.replicas": "2"})])[
        "demo-under-min-isr"].result(30)

    def colour(selector: str) -> str:
        return browser.execute_script("return getComputedStyle(document.querySelector(arguments[0])).color;", selector)

    def shown_unhealthy() -> bool:
        browser.get(demo + "/ui/#/topics")
        wait_until(lambda: browser.find_elements("css selector", "tr[data-topic='demo-events']"), 30,
                   message="the topic list")
        return bool(browser.find_elements("css selector", "tr.unhealthy[data-topic='demo-under-min-isr']"))

    wait_until(shown_unhealthy, 60, interval=1, message="the topic under min ISR shown unhealthy")
    err = browser.execute_script("return getComputedStyle(document.documentElement).getPropertyValue('--err');")
    unhealthy = colour("tr[data-topic='demo-under-min-isr'] td.replication")
    assert unhealthy != colour("tr[data-topic='demo-events'] td.replication"), unhealthy
    assert browser.find_elements("css selector", ".cluster-health.unhealthy")
    assert "min ISR" in browser.find_element("css selector", "tr[data-topic='demo-under-min-isr']").text
    screenshot(browser, "topics-unhealthy")
    browser.get(demo + "/ui/#/topic/local/demo-under-min-isr")
    wait_until(lambda: browser.find_elements("css selector", "tr[data-partition='0'] td.replication.unhealthy"), 30,
               message="the partition's replication shown unhealthy")
    assert colour("tr[data-partition='0'] td.replication") == unhealthy, err


def test_readable_on_a_phone(demo, browser):
    browser.set_window_size(390, 844)
    try:
        for name, path in (("phone-groups", "#/groups"), ("phone-group", "#/group/local/demo-lagging")):
            browser.get(demo + "/ui/" + path)
            wait_until(lambda: browser.find_elements("css selector", "tbody tr td .badge"), 30, message=path)
            # Nothing wider than the screen: tables scroll inside their own box, not the page.
            assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth;"), path
            screenshot(browser, name)
    finally:
        browser.set_window_size(1280, 800)


# --- Grafana dashboard and Prometheus alert rules -------------------------------------------------------

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}


def promql_metrics(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords, label names,
    durations or dashboard variables."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)
    names = re.findall(r"(?<![\w.])([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr)
    return {name for name in names if name.lower() not in PROMQL_WORDS}


def test_promql_metrics_reads_names_not_functions_or_labels():
    assert promql_metrics('sum by (cluster, topic) (rate(burrow_a{cluster=~"$cluster"}[5m])) > 0 and on(x) b_c') \
        == {"burrow_a", "b_c"}


def dashboard_queries(name: str = "grafana-dashboard.json") -> list[str]:
    dashboard = json.loads((ROOT / "config" / name).read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", variable["query"]["query"]))
    return queries


def alert_queries(name: str = "prometheus-alerts.yml") -> list[str]:
    rules = yaml.safe_load((ROOT / "config" / name).read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


@pytest.mark.parametrize(("name", "variables"), [("grafana-dashboard.json", {"datasource", "cluster", "group"}),
                                                  ("broker-grafana-dashboard.json", {"datasource", "instance", "topic"})])
def test_grafana_dashboard_is_well_formed(name, variables):
    dashboard = json.loads((ROOT / "config" / name).read_text())
    panels = dashboard["panels"]
    assert len({panel["id"] for panel in panels}) == len(panels)
    cells = set()
    for panel in panels:
        assert panel["title"] and panel["targets"] and panel["datasource"]["uid"] == "${datasource}"
        box = panel["gridPos"]
        assert box["x"] + box["w"] <= 24
        covered = {(x, y) for x in range(box["x"], box["x"] + box["w"]) for y in range(box["y"], box["y"] + box["h"])}
        assert not covered & cells, f"panel {panel['title']!r} overlaps another"
        cells |= covered
    assert {variable["name"] for variable in dashboard["templating"]["list"]} == variables
    used = {word for query in dashboard_queries(name) for word in re.findall(r"\$(\w+)", query)}
    assert used <= variables


def fires(eval_time: str, alertname: str, severity: str, summary: str, description: str, **labels: str) -> dict:
    """A promtool alert_rule_test: ``alertname`` firing at ``eval_time`` for group stuck of cluster local."""
    return {"eval_time": eval_time, "alertname": alertname, "exp_alerts": [{
        "exp_labels": {"severity": severity, "cluster": "local", "consumer_group": "stuck", **labels},
        "exp_annotations": {"summary": summary, "description": description}}]}


def check_alert_rules(name: str, input_series: list[dict], alert_rule_test: list[dict], scratch: Path) -> None:
    """config/``name`` passes ``promtool check rules``, and its alerts fire as ``alert_rule_test`` says (promtool's
    unit test, at one-minute steps) on ``input_series``."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: make install puts in Debian's prometheus package (apt, as root)"
    rules = ROOT / "config" / name
    checked = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    unit_test = {"rule_files": [str(rules)], "evaluation_interval": "1m",
                 "tests": [{"interval": "1m", "input_series": input_series, "alert_rule_test": alert_rule_test}]}
    path = scratch / f"{name}-test.yml"
    path.write_text(yaml.safe_dump(unit_test))
    tested = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_alert_rules_pass_promtool_and_fire(tmp_path):
    group = 'cluster="local",consumer_group="stuck"'
    check_alert_rules(
        "prometheus-alerts.yml",
        [
            {"series": f"burrow_kafka_consumer_status{{{group}}}", "values": "3x10"},
            {"series": 'burrow_kafka_consumer_status{cluster="local",consumer_group="fine"}', "values": "1x10"},
            {"series": f"burrow_kafka_consumer_max_lag_seconds{{{group}}}", "values": "700x10"},
            {"series": f"burrow_kafka_consumer_group_falling_behind_records_per_second{{{group}}}",
             "values": "340x20"},
            {"series": f'burrow_kafka_topic_partition_status{{{group},topic="t",partition="0"}}',
             "values": "5x10"},
        ],
        [
            {"eval_time": "4m", "alertname": "KafkaConsumerGroupError", "exp_alerts": []},
            fires("6m", "KafkaConsumerGroupError", "critical", "Consumer group stuck on local is ERR",
                  "A partition of stuck is STOP (no commit while lag is left) or STALL (commits without "
                  "progress). Dashboard: /ui/#/group/local/stuck"),
            fires("6m", "KafkaConsumerTimeLagHigh", "warning", "stuck on local is 11m 40s behind",
                  "The oldest record the group has not consumed is older than 10 minutes."),
            {"eval_time": "6m", "alertname": "KafkaConsumerTimeLagCritical", "exp_alerts": []},
            {"eval_time": "14m", "alertname": "KafkaConsumerGroupFallingBehind", "exp_alerts": []},
            fires("16m", "KafkaConsumerGroupFallingBehind", "warning", "stuck on local falls behind by 340 records/s",
                  "For 15 minutes producers have written faster than the group consumes: at these rates it "
                  "never catches up."),
            fires("6m", "KafkaConsumerPartitionStalled", "warning", "stuck is stalled on t/0",
                  "The group keeps committing the same offset while the partition has lag (a poison record "
                  "or a stuck handler, usually).", topic="t", partition="0"),
        ],
        tmp_path)


def test_probe_alert_rules_fire(tmp_path):
    slow, down = 'cluster="local",broker="2"', 'cluster="local",broker="3"'
    buckets = [("0.5", "0x20"), ("2.5", "0+60x20"), ("+Inf", "0+60x20")]

    def fired(eval_time: str, alertname: str, severity: str, broker: str, summary: str, description: str) -> dict:
        return {"eval_time": eval_time, "alertname": alertname, "exp_alerts": [{
            "exp_labels": {"severity": severity, "cluster": "local", "broker": broker},
            "exp_annotations": {"summary": summary, "description": description}}]}

    check_alert_rules(
        "prometheus-alerts.yml",
        [
            {"series": 'burrow_kafka_probe_success_ratio{cluster="local",broker="1"}', "values": "1x20"},
            {"series": f"burrow_kafka_probe_success_ratio{{{down}}}", "values": "0x20"},
            # broker 2's probes all take between 0.5 and 2.5 s
            *({"series": f'burrow_kafka_probe_end_to_end_seconds_bucket{{{slow},le="{le}"}}', "values": values}
              for le, values in buckets),
            {"series": f"burrow_kafka_probe_commit_failures_total{{{down}}}", "values": "0+6x20"},
        ],
        [
            {"eval_time": "4m", "alertname": "KafkaProbeFailing", "exp_alerts": []},
            fired("6m", "KafkaProbeFailing", "critical", "3", "Probes through broker 3 of local succeed 0%",
                  "Records the monitor writes to the probe partition this broker leads are not acknowledged or not "
                  "read back within probe-timeout: producers and consumers of its partitions are stalled too. "
                  "Details: /v3/kafka/local/probe"),
            fired("16m", "KafkaProbeSlow", "warning", "2", "Probes through broker 2 of local take 2.48s end to end (p99)",
                  "Producing a record with acks=all and reading it back takes over a second at the 99th percentile."),
            fired("16m", "KafkaProbeCommitsFailing", "warning", "3",
                  "Offset commits of the probe group through coordinator 3 of local fail",
                  "For 10 minutes the probe group's commits have failed or timed out: groups this broker "
                  "coordinates may not be able to commit either."),
        ],
        tmp_path)


def test_notifier_sender_alerts_fire(tmp_path):
    def leader(instance: str, values: str) -> dict:
        return {"series": f'burrowpy_notifier_leader{{job="burrowpy",instance="{instance}",lock="kafka"}}',
                "values": values}

    def alert(eval_time: str, name: str, severity: str, summary: str) -> dict:
        description = {rule["alert"]: rule["annotations"]["description"] for group in yaml.safe_load(
            (ROOT / "config" / "prometheus-alerts.yml").read_text())["groups"] for rule in group["rules"]}[name]
        return {"eval_time": eval_time, "alertname": name, "exp_alerts": [{
            "exp_labels": {"severity": severity, "job": "burrowpy"},
            "exp_annotations": {"summary": summary, "description": description}}]}

    # a sends for 10 minutes, then nobody for 5 (a and b both down to 0), then both for 5
    check_alert_rules(
        "prometheus-alerts.yml",
        [leader("a", "1x9 0x5 1x5"), leader("b", "0x9 0x5 1x5")],
        [{"eval_time": "9m", "alertname": "BurrowpyNoNotifierSender", "exp_alerts": []},
         alert("13m", "BurrowpyNoNotifierSender", "critical", "No burrowpy instance of burrowpy sends notifications"),
         {"eval_time": "13m", "alertname": "BurrowpyNotifierSenders", "exp_alerts": []},
         alert("18m", "BurrowpyNotifierSenders", "warning", "2 burrowpy instances of burrowpy send notifications")],
        tmp_path)


def test_share_group_alert_fires(tmp_path):
    partition = 'cluster="local",share_group="jobs",topic="work",partition="0"'
    check_alert_rules(
        "prometheus-alerts.yml",
        [{"series": f"burrow_kafka_share_group_partition_status{{{partition}}}", "values": "5x10"},
         {"series": 'burrow_kafka_share_group_partition_status{cluster="local",share_group="fine",topic="work",'
                    'partition="0"}', "values": "1x10"}],
        [{"eval_time": "4m", "alertname": "KafkaShareGroupStalled", "exp_alerts": []},
         {"eval_time": "6m", "alertname": "KafkaShareGroupStalled", "exp_alerts": [{
             "exp_labels": {"severity": "warning", "cluster": "local", "share_group": "jobs", "topic": "work",
                            "partition": "0"},
             "exp_annotations": {
                 "summary": "Share group jobs is stuck on work/0",
                 "description": "The share-partition start offset has not moved while records wait: no member "
                                "acknowledges them (none running, or a record that keeps failing). Details: "
                                "/v3/kafka/local/share-group/jobs/lag"}}]}],
        tmp_path)


def test_topic_health_alert_rules_fire(tmp_path):
    def fired(eval_time: str, alertname: str, severity: str, summary: str, description: str) -> dict:
        return {"eval_time": eval_time, "alertname": alertname, "exp_alerts": [{
            "exp_labels": {"severity": severity, "cluster": "local"},
            "exp_annotations": {"summary": summary, "description": description}}]}

    check_alert_rules(
        "prometheus-alerts.yml",
        [
            {"series": 'burrow_kafka_cluster_offline_partitions{cluster="local"}', "values": "0 0 2x20"},
            {"series": 'burrow_kafka_cluster_offline_partitions{cluster="fine"}', "values": "0x20"},
            {"series": 'burrow_kafka_cluster_under_min_isr_partitions{cluster="local"}', "values": "3x20"},
            {"series": 'burrow_kafka_cluster_under_replicated_partitions{cluster="local"}', "values": "4x20"},
            # read at 0 s, then never again
            {"series": 'burrow_kafka_cluster_health_read_timestamp_seconds{cluster="local"}', "values": "0x20"},
        ],
        [
            {"eval_time": "2m", "alertname": "KafkaClusterOfflinePartitions", "exp_alerts": []},
            fired("3m", "KafkaClusterOfflinePartitions", "critical", "2 partitions of local are offline",
                  "Partitions without a leader on a live broker: nothing can be written to or read from them. "
                  "Topics: /ui/#/topics/local"),
            {"eval_time": "4m", "alertname": "KafkaClusterUnderReplicatedPartitions", "exp_alerts": []},
            fired("5m", "KafkaClusterUnderMinIsrPartitions", "critical",
                  "3 partitions of local are under their min.insync.replicas",
                  "Their in-sync replicas are fewer than the topic's min.insync.replicas: producers with acks=all "
                  "are refused (NOT_ENOUGH_REPLICAS). Topics: /ui/#/topics/local"),
            fired("5m", "KafkaClusterUnderReplicatedPartitions", "warning", "4 partitions of local are under-replicated",
                  "For 5 minutes their ISR has been smaller than their replica list: a broker is down or cannot "
                  "keep up. Topics: /ui/#/topics/local"),
            {"eval_time": "9m", "alertname": "KafkaTopicHealthStale", "exp_alerts": []},
            fired("11m", "KafkaTopicHealthStale", "warning", "Topic health of local was last read 11m 0s ago",
                  "The monitor could not read the cluster's Metadata for over 5 minutes: the partition counts "
                  "are out of date. See the monitor's log."),
        ],
        tmp_path)


# Metrics served only while some group is in a given state, which the demo's groups may not reach within the
# wait below (a group is catching up only while its lag shrinks faster than the noise): the module that puts a
# group in that state and checks the metric is served.
SERVED_IN_A_STATE = {"burrow_kafka_consumer_group_catch_up_seconds": "test_catch_up_forecast.py",
                     # only for share groups, which Kafka has and our broker (the demo's) has not
                     "burrow_kafka_share_group_partition_lag": "test_monitor_real_kafka.py",
                     "burrow_kafka_share_group_partition_status": "test_monitor_real_kafka.py",
                     "burrow_kafka_share_group_partition_in_flight": "test_monitor_real_kafka.py",
                     # only with notifiers, which the demo has none of
                     "burrowpy_notifier_leader": "test_notifier_kafka_lock.py"}


def test_dashboard_and_alerts_use_only_metrics_the_monitor_serves(demo):
    referenced = set().union(*(promql_metrics(query) for query in dashboard_queries() + alert_queries()))
    assert {"burrow_kafka_consumer_status", "burrow_kafka_consumer_max_lag_seconds",
            "burrow_kafka_consumer_partition_lag_seconds",
            "burrow_kafka_consumer_group_falling_behind_records_per_second"} <= referenced
    served: set[str] = set()

    def all_served() -> bool:
        status, text = get(demo + "/metrics", accept="text/plain")
        served.update(sample.name for family in text_string_to_metric_families(text) for sample in family.samples)
        return status == 200 and referenced - set(SERVED_IN_A_STATE) <= served

    wait_until(all_served, 90, interval=1, message=f"/metrics serving {sorted(referenced - served)}")
    for name, module in SERVED_IN_A_STATE.items():
        assert name in (ROOT / "tests" / "integration" / module).read_text(), f"{module} checks {name} is served"


def test_broker_alert_rules_pass_promtool_and_fire(tmp_path):
    rules = ROOT / "config" / "broker-prometheus-alerts.yml"
    one, two = 'job="kafka",instance="b1"', 'job="kafka",instance="b2"'
    logdir = "/data/logs"
    descriptions = {rule["alert"]: rule["annotations"]["description"]
                    for group in yaml.safe_load(rules.read_text())["groups"] for rule in group["rules"]}

    def fired(eval_time: str, alertname: str, severity: str, summary: str, **labels: str) -> dict:
        return {"eval_time": eval_time, "alertname": alertname,
                "exp_alerts": [{"exp_labels": {"severity": severity, **labels},
                                "exp_annotations": {"summary": summary, "description": descriptions[alertname]}}]}

    check_alert_rules(
        rules.name,
        [
            # the controller fails at minute 3: nobody takes over
            {"series": f"kafka_controller_kafkacontroller_activecontrollercount{{{one}}}", "values": "1 1 1 0x10"},
            {"series": f"kafka_controller_kafkacontroller_activecontrollercount{{{two}}}", "values": "0x13"},
            {"series": f"kafka_server_replicamanager_underreplicatedpartitions{{{one}}}", "values": "0 0 4x12"},
            {"series": f"kafka_server_replicamanager_underminisrpartitioncount{{{one}}}", "values": "0x13"},
            {"series": f"kafka_log_logmanager_offlinelogdirectorycount{{{two}}}", "values": "0 0 1x3 0x8"},
            {"series": f'burrowpy_broker_storage_errors_total{{{two},logdir="{logdir}"}}',
             "values": "0 0 3 9 9x10"},
        ],
        [
            {"eval_time": "3m", "alertname": "KafkaNoActiveController", "exp_alerts": []},
            fired("5m", "KafkaNoActiveController", "critical", "0 active controllers in kafka", job="kafka"),
            {"eval_time": "6m", "alertname": "KafkaUnderReplicatedPartitions", "exp_alerts": []},
            fired("7m", "KafkaUnderReplicatedPartitions", "warning", "b1 leads 4 under-replicated partitions",
                  job="kafka", instance="b1"),
            {"eval_time": "7m", "alertname": "KafkaUnderMinIsrPartitions", "exp_alerts": []},
            fired("3m", "KafkaLogDirOffline", "critical", "A log dir of b2 refuses writes", job="kafka",
                  instance="b2"),
            {"eval_time": "6m", "alertname": "KafkaLogDirOffline", "exp_alerts": []},
            {"eval_time": "1m", "alertname": "KafkaStorageErrors", "exp_alerts": []},
            fired("3m", "KafkaStorageErrors", "warning", f"b2 failed writes to {logdir}", job="kafka",
                  instance="b2", logdir=logdir),
        ],
        tmp_path)


def test_the_broker_dashboard_and_alerts_use_only_metrics_the_broker_serves(broker):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from monitor_support import create_topic

    referenced = set().union(*(promql_metrics(query) for query in dashboard_queries("broker-grafana-dashboard.json")
                               + alert_queries("broker-prometheus-alerts.yml")))
    assert {"kafka_server_replicamanager_underreplicatedpartitions", "kafka_server_brokertopicmetrics_messagesin_total",
            "kafka_network_requestmetrics_totaltimems_bucket", "burrowpy_broker_storage_errors_total"} <= referenced
    topic = "broker-dashboard"
    create_topic(broker.bootstrap, topic, 1)
    # quotas far above what it sends hold this client, so that it has Kafka's per-client quota figures
    for key in ("producer_byte_rate", "consumer_byte_rate", "request_percentage"):
        set_quota(broker.bootstrap, [("client-id", topic)], key, 10**9)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "client.id": topic})
    producer.produce(topic, b"a record")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic, "client.id": topic})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        wait_until(lambda: consumer.poll(0.5) is not None, 30, interval=0, message="the record back")
    finally:
        consumer.close()
    # the metadata quorum's are a cluster's only (test_faults reads them from a cluster's brokers)
    raft = {"kafka_server_raft_metrics_current_epoch", "kafka_server_raft_metrics_current_leader",
            "burrowpy_broker_raft_commit_lag"}
    assert referenced - Scrape(BROKER_METRICS_PORT).names() == raft


def test_the_dashboard_behind_http_authentication(browser, broker, tmp_path):
    """A listener with an http-auth profile: the browser is asked for a password (401 with a Basic
    challenge), and once given one, every page and its API calls work with it; no password, no data."""
    from burrow_support import CLUSTER, BurrowpyProcess, MonitorSettings
    from confluent_kafka import Consumer, TopicPartition
    from monitor_support import create_topic

    from burrowpy.httpauth import hash_password

    class AuthenticatedMonitor(BurrowpyProcess):
        def config(self) -> dict:
            config = super().config()
            config["http-auth"] = {"team": {"readers": {"viewer": hash_password("viewer-pass")}}}
            config["httpserver"]["default"]["auth"] = "team"
            return config

    group = topic = "behind-auth"
    create_topic(broker.bootstrap, topic, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        wait_until(lambda: consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False) or True, 60,
                   interval=0.5, message="a commit")
    finally:
        consumer.close()
    settings = MonitorSettings(broker.bootstrap, offset_refresh=1, topic_refresh=1, expire_cache=1)
    with AuthenticatedMonitor(tmp_path / "monitor", settings) as monitor:
        status, body = get(monitor.base + "/ui/", accept="text/html")
        assert status == 401 and '"message":"authentication required' in body
        assert get(monitor.base + f"/v3/kafka/{CLUSTER}/consumer")[0] == 401
        browser.get(f"http://viewer:viewer-pass@127.0.0.1:{monitor.port}/ui/#/groups")
        wait_until(lambda: group in group_rows(browser), 60, interval=0.5,
                   message="the group list, fetched with the browser's credentials")
        screenshot(browser, "behind-auth")
