"""bench/broker_report.py: the README's broker tables come from a results file of bench/broker_matrix.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bench import broker_report


def run(broker: str, phase: str, rate: float, cpu_s: float, records: int = 1_000_000, warm_up: bool = False,
        arrangement: str = "pinned", partitions: int = 1) -> dict:
    return {"arrangement": arrangement, "broker": broker, "client": "kcat", "size": 100, "partitions": partitions,
            "clients": 1, "acks": "1", "phase": phase, "warm_up": warm_up, "records": records,
            "seconds": records / rate, "records_per_s": rate, "mb_per_s": rate * 100 / 1e6, "broker_cpu_s": cpu_s,
            "broker_cpu_pct": 0.0, "clients_cpu_pct": 0.0, "broker_waited_pct": 0.0}


def results(runs: list[dict], finished: bool = True) -> dict:
    return {"name": "t", "date": "2026-11-27 20:00 UTC", "command": "bench/broker_matrix.py --quick",
            "commit": "abc1234", "machine": {"cpus": 2, "kernel": "6.1", "congestion_control": "bbr",
                                             "loadavg_start": 0.5, "loadavg_end": 1.5},
            "kafka_version": "4.4.0", "shared_settings": {"socket.send.buffer.bytes": 102400},
            "seconds_per_row": 4, "runs": runs, "finished": finished,
            "latency": [{"arrangement": "pinned", "broker": "ours", "rate": 20000, "size": 100, "acks": "all",
                         "linger_ms": 5, "seconds": 10.0, "drop": 3.0, "p50_ms": 1.5, "p99_ms": 4.25,
                         "p999_ms": 9.0},
                        {"arrangement": "pinned", "broker": "Kafka", "rate": 20000, "size": 100, "acks": "all",
                         "linger_ms": 5, "seconds": 10.0, "drop": 3.0, "p50_ms": 2.0, "p99_ms": 6.0,
                         "p999_ms": 12.5}]}


MATRIX = [
    # warm-ups, far from the measured figures: they must not show
    run("ours", "produce", 1.0, 99.0, warm_up=True), run("Kafka", "produce", 1.0, 99.0, warm_up=True),
    run("ours", "produce", 300_000, 1.5), run("ours", "consume", 150_000, 0.25),
    run("Kafka", "produce", 200_000, 3.0), run("Kafka", "consume", 200_000, 2.0),
    # a row only ours has figures for (a run stopped half-way): dashes, not a crash
    run("ours", "produce", 100_000, 2.0, partitions=6),
]


def table_row(text: str, label: str) -> list[str]:
    line = next(line for line in text.splitlines() if f"| {label} |" in line)
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_rates_ratios_and_cpu_per_million_records() -> None:
    text = broker_report.report(results(MATRIX), "bench/results/t.json")
    cells = table_row(text, "100 B, 1 part., 1 client, acks=1")
    assert cells == ["kcat", "100 B, 1 part., 1 client, acks=1",
                     "300,000", "200,000", "1.50", "1.50", "3.00", "0.50",
                     "150,000", "200,000", "0.75", "0.25", "2.00", "0.12"]
    assert table_row(text, "100 B, 6 part., 1 client, acks=1")[2:] == ["-"] * 12
    assert "Per core" in text and "Unpinned" not in text  # only the arrangements that ran
    assert table_row(text, "pinned")[1:] == ["1.50 / 4.25 / 9.00", "2.00 / 6.00 / 12.50"]
    assert "bench/results/t.json" in text and "bench/broker_matrix.py --quick" in text and "2026-11-27" in text
    assert "did not finish" not in text


def test_the_median_run_of_a_repeated_row_and_an_unfinished_run() -> None:
    repeated = [run("ours", "produce", rate, cpu) for rate, cpu in ((100_000, 9.0), (300_000, 1.0), (200_000, 2.0))]
    repeated += [run("Kafka", "produce", 100_000, 1.0)]
    text = broker_report.report(results(repeated, finished=False), "t.json")
    assert table_row(text, "100 B, 1 part., 1 client, acks=1")[2:8] == ["200,000", "100,000", "2.00", "2.00",
                                                                         "1.00", "2.00"]
    assert "did not finish" in text


def test_readme_section_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "r.json"
    source.write_text(json.dumps(results(MATRIX)))
    readme = tmp_path / "README.md"
    readme.write_text(f"# Bench\n\nbefore\n{broker_report.BEGIN}\nold table\n{broker_report.END}\nafter\n")
    monkeypatch.setattr(sys, "argv", ["broker_report.py", str(source), "--readme", str(readme)])
    assert broker_report.main() == 0
    text = readme.read_text()
    assert "old table" not in text and text.startswith("# Bench\n\nbefore\n") and text.endswith("after\n")
    assert "| kcat | 100 B, 1 part., 1 client, acks=1 | 300,000 |" in text
    once = text
    assert broker_report.main() == 0  # run again: the same text, not a second copy
    assert readme.read_text() == once


def test_a_readme_without_the_section_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "r.json"
    source.write_text(json.dumps(results(MATRIX)))
    readme = tmp_path / "README.md"
    readme.write_text("# Bench\n")
    monkeypatch.setattr(sys, "argv", ["broker_report.py", str(source), "--readme", str(readme)])
    with pytest.raises(SystemExit):
        broker_report.main()
    assert readme.read_text() == "# Bench\n"
