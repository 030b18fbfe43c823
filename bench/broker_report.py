"""The broker-versus-Kafka tables, generated from one results file of bench/broker_matrix.py.

    .venv/bin/python bench/broker_report.py bench/results/DATE-NAME.json            # print the markdown
    .venv/bin/python bench/broker_report.py bench/results/DATE-NAME.json --readme bench/README.md

With ``--readme`` the tables replace what stands between the README's ``<!-- broker-matrix begin -->`` and
``<!-- broker-matrix end -->`` lines, so that the README's broker table is never written by hand. Warm-up runs
are left out; a row measured more than once (``--repeat``) shows its median run by rate, and that run's CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- broker-matrix begin -->"
END = "<!-- broker-matrix end -->"
OURS, KAFKA = "ours", "Kafka"
ARRANGEMENTS = {
    "pinned": "Per core: each broker kept to one core, all the clients on the other (`taskset`)",
    "unpinned": "Unpinned: the broker and its clients share both cores (what a colocated deployment sees)",
}


def row_label(run: dict) -> str:
    size = f"{run['size']} B" if run["size"] < 1024 else f"{run['size'] // 1024} KiB"
    clients = run["clients"]
    return f"{size}, {run['partitions']} part., {clients} client{'s' * (clients > 1)}, acks={run['acks']}"


def cpu_per_million(run: dict) -> float:
    """The broker's CPU seconds per million records of the run."""
    return run["broker_cpu_s"] / run["records"] * 1e6


def median_run(runs: list[dict]) -> dict:
    """The run with the median rate (the lower middle one of an even count)."""
    return sorted(runs, key=lambda run: run["records_per_s"])[(len(runs) - 1) // 2]


def ratio(ours: float, kafka: float) -> str:
    return f"{ours / kafka:.2f}" if kafka else "-"


def measured(results: dict) -> dict[tuple, dict[str, list[dict]]]:
    """The measured runs by (arrangement, client, row, phase), then by broker, in the order they ran."""
    found: dict[tuple, dict[str, list[dict]]] = {}
    for run in results["runs"]:
        if not run["warm_up"]:
            key = (run["arrangement"], run["client"], run["size"], run["partitions"], run["clients"], run["acks"],
                   run["phase"])
            found.setdefault(key, {}).setdefault(run["broker"], []).append(run)
    return found


def throughput_table(results: dict, arrangement: str) -> Iterable[str]:
    runs = measured(results)
    rows = list(dict.fromkeys(key[1:6] for key in runs if key[0] == arrangement))
    if not rows:
        return
    yield f"**{ARRANGEMENTS.get(arrangement, arrangement)}.** Records/s, and the broker's CPU seconds per million "
    yield "records (utime + stime from `/proc`; ratio < 1: ours uses less CPU per record)."
    yield ""
    yield ("| client | row | produce ours | produce Kafka | ratio | CPU s/M ours | CPU s/M Kafka | CPU ratio "
           "| consume ours | consume Kafka | ratio | CPU s/M ours | CPU s/M Kafka | CPU ratio |")
    yield "|---|---|" + "---:|" * 12
    for client, *row in rows:
        cells = []
        for phase in ("produce", "consume"):
            pair = runs.get((arrangement, client, *row, phase), {})
            if OURS not in pair or KAFKA not in pair:
                cells += ["-"] * 6
                continue
            ours, kafka = median_run(pair[OURS]), median_run(pair[KAFKA])
            cells += [f"{ours['records_per_s']:,.0f}", f"{kafka['records_per_s']:,.0f}",
                      ratio(ours["records_per_s"], kafka["records_per_s"]),
                      f"{cpu_per_million(ours):.2f}", f"{cpu_per_million(kafka):.2f}",
                      ratio(cpu_per_million(ours), cpu_per_million(kafka))]
        size, partitions, clients, acks = row
        label = row_label({"size": size, "partitions": partitions, "clients": clients, "acks": acks})
        yield f"| {client} | {label} | " + " | ".join(cells) + " |"
    yield ""


def latency_table(results: dict) -> Iterable[str]:
    runs = results.get("latency", [])
    if not runs:
        return
    first = runs[0]
    yield (f"**Produce latency** at a fixed {first['rate']:,} records/s, {first['size']} B, one partition, "
           f"acks={first['acks']}, librdkafka with linger.ms={first['linger_ms']}, {first['seconds']:g} s per run "
           f"of which the first {first['drop']:g} s are dropped (send to acknowledgement, ms):")
    yield ""
    yield "| arrangement | ours p50 / p99 / p999 | Kafka p50 / p99 / p999 |"
    yield "|---|---:|---:|"
    for arrangement in dict.fromkeys(run["arrangement"] for run in runs):
        cells = []
        for broker in (OURS, KAFKA):
            found = [run for run in runs if run["arrangement"] == arrangement and run["broker"] == broker]
            if found:
                run = sorted(found, key=lambda run: run["p99_ms"])[(len(found) - 1) // 2]
                cells.append(f"{run['p50_ms']:.2f} / {run['p99_ms']:.2f} / {run['p999_ms']:.2f}")
            else:
                cells.append("-")
        yield f"| {arrangement} | " + " | ".join(cells) + " |"
    yield ""


def report(results: dict, source: str) -> str:
    machine = results["machine"]
    lines = [
        f"Generated by `bench/broker_report.py` from `{source}` (one run, {results['date']}, commit "
        f"{results['commit']}): `{results['command']}`. {machine['cpus']} CPUs, Linux {machine['kernel']}, TCP "
        f"congestion control {machine['congestion_control']} for both brokers; load average "
        f"{machine['loadavg_start']:.2f} at the start, {machine.get('loadavg_end', float('nan')):.2f} at the end. "
        "Both brokers ran with " + ", ".join(f"`{key}={value}`" for key, value in results["shared_settings"].items())
        + f"; Apache Kafka {results['kafka_version']}"
        + (f"; ours: a cluster of {results['ours_nodes']} of our brokers on this machine, each topic's partitions "
           "spread over them, CPU figures all of them together" if results.get("ours_nodes", 1) > 1 else "")
        + ". Each row: one warm-up run on each broker, then one measured "
        f"run each, about {results['seconds_per_row']:g} s on the slower broker; the broker going first alternates "
        "from row to row.",
        "",
    ]
    if not results.get("finished"):
        lines += ["**This run did not finish: the tables hold the rows measured before it stopped.**", ""]
    for arrangement in dict.fromkeys(run["arrangement"] for run in results["runs"]):
        lines += throughput_table(results, arrangement)
    lines += latency_table(results)
    return "\n".join(lines)


def replace_section(text: str, section: str) -> str:
    """``text`` with what stands between the BEGIN and END lines replaced by ``section``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN!r} ... {END!r} section to replace")
    return text[:start + len(BEGIN)] + "\n" + section.rstrip("\n") + "\n" + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results file of bench/broker_matrix.py")
    parser.add_argument("--readme", type=Path, default=None,
                        help="write the tables into this markdown file's broker-matrix section instead of printing")
    args = parser.parse_args()
    results = json.loads(args.results.read_text())
    source = args.results.resolve()
    source = source.relative_to(ROOT).as_posix() if source.is_relative_to(ROOT) else args.results.name
    text = report(results, source)
    if args.readme:
        try:
            args.readme.write_text(replace_section(args.readme.read_text(), text))
        except ValueError as exc:
            parser.error(f"{args.readme}: {exc}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
