"""The daemon's log output: JSON or console, levels by Burrow's names, rotation like lumberjack."""

from __future__ import annotations

import gzip
import io
import json
import logging
import os

import structlog

from burrowpy.config import LoggingConfig
from burrowpy.logging import LogControl, parse_level


def json_lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_when_not_a_terminal_and_level_filtering():
    stream = io.StringIO()
    control = LogControl(LoggingConfig(level="info"), stream=stream, name="burrowpy.test_json")
    try:
        log = control.logger.bind(type="module", name="storage")
        log.debug("hidden")
        log.info("stored", offsets=3)
        lines = json_lines(stream)
        assert [line["event"] for line in lines] == ["stored"]
        assert lines[0]["level"] == "info" and lines[0]["offsets"] == 3 and lines[0]["name"] == "storage"
        assert lines[0]["timestamp"].endswith("Z")  # UTC unless use-localtime
    finally:
        control.close()


def test_level_changes_at_run_time_by_burrows_names():
    stream = io.StringIO()
    control = LogControl(LoggingConfig(level="error"), stream=stream, name="burrowpy.test_levels")
    try:
        assert control.level == "error"
        control.logger.warning("before")
        assert control.set_level("TRACE") and control.level == "debug"
        control.logger.debug("after")
        assert not control.set_level("chatty") and control.level == "debug"
        assert control.set_level("panic") and control.level == "panic"
        control.logger.error("below panic")
        control.logger.critical("fatal")
        assert [line["event"] for line in json_lines(stream)] == ["after", "fatal"]
    finally:
        control.close()


def test_a_debug_call_below_the_level_runs_no_processor(monkeypatch):
    """The evaluator logs a debug line per group evaluated: below the level, the event is not even built (the
    processors, first the level filter, are not run); at debug level, set while running, it is logged as before."""
    filtered: list[str] = []
    level_filter = structlog.stdlib.filter_by_level

    def counted(logger: logging.Logger, method_name: str, event_dict: dict) -> dict:
        filtered.append(method_name)
        return level_filter(logger, method_name, event_dict)

    monkeypatch.setattr(structlog.stdlib, "filter_by_level", counted)
    stream = io.StringIO()
    control = LogControl(LoggingConfig(level="info"), stream=stream, name="burrowpy.test_debug_cost")
    try:
        log = control.logger.bind(evaluator="default")
        for group in range(3):
            log.debug("evaluation result", group=group)
        assert filtered == [] and stream.getvalue() == ""
        log.info("shown")
        assert filtered == ["info"]
        assert control.set_level("debug")
        log.debug("evaluation result", group=7)
        lines = json_lines(stream)
        assert [(line["event"], line["level"]) for line in lines] == [("shown", "info"), ("evaluation result", "debug")]
        assert lines[1]["group"] == 7 and lines[1]["evaluator"] == "default"
    finally:
        control.close()


def test_level_names():
    assert [parse_level(name) for name in ("debug", "Info", "warn", "warning", "error", "fatal", "x")] == [
        logging.DEBUG,
        logging.INFO,
        logging.WARNING,
        logging.WARNING,
        logging.ERROR,
        logging.CRITICAL,
        None,
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_console_format_on_a_terminal():
    stream = Terminal()
    control = LogControl(LoggingConfig(), stream=stream, name="burrowpy.test_console")
    try:
        control.logger.info("hello", group="g1")
        text = stream.getvalue()
        assert "hello" in text and "group" in text and not text.lstrip().startswith("{")
    finally:
        control.close()


def test_library_records_are_captured_and_released():
    stream = io.StringIO()
    control = LogControl(
        LoggingConfig(level="info"), stream=stream, name="burrowpy.test_capture", capture_libraries=True
    )
    library = logging.getLogger("kazoo.test_capture")
    try:
        library.warning("connection lost to %s", "zk1")
        line = json_lines(stream)[-1]
        assert (line["event"], line["level"], line["logger"]) == (
            "connection lost to zk1",
            "warning",
            "kazoo.test_capture",
        )
    finally:
        control.close()
    library.warning("after close")
    assert "after close" not in stream.getvalue()


def test_log_file_rotates_keeps_maxbackups_and_compresses(tmp_path):
    settings = LoggingConfig(
        filename=str(tmp_path / "logs" / "burrow.log"), maxsize=1, maxbackups=2, use_compression=True
    )
    control = LogControl(settings, name="burrowpy.test_rotate")
    handler = control.handler
    try:
        chunk = "x" * 2000
        for _ in range(4 * 1024 * 1024 // 2000):  # about four rotations at 1 MB each
            control.logger.info(chunk)
        handler.wait_housekeeping()
        backups = sorted(name for name in os.listdir(tmp_path / "logs") if name != "burrow.log")
        assert len(backups) == 2 and all(
            name.startswith("burrow-") and name.endswith(".log.gz") for name in backups
        )
        with gzip.open(tmp_path / "logs" / backups[-1], "rt") as backup:
            first = json.loads(backup.readline())
        assert first["event"] == chunk
        assert os.path.getsize(tmp_path / "logs" / "burrow.log") <= 1024 * 1024
    finally:
        control.close()


def test_old_backups_are_removed_after_maxage_days(tmp_path):
    settings = LoggingConfig(filename=str(tmp_path / "burrow.log"), maxbackups=0, maxage=10)
    control = LogControl(settings, name="burrowpy.test_maxage")
    try:
        (tmp_path / "burrow-2001-01-01T00-00-00.000.log").write_text("old\n")
        (tmp_path / "burrow-2001-01-01T00-00-00.000.log.gz").write_text("old\n")
        (tmp_path / "unrelated-2001-01-01T00-00-00.000.log").write_text("keep\n")
        control.logger.info("before rotation")
        control.handler.doRollover()
        control.handler.wait_housekeeping()
        names = sorted(os.listdir(tmp_path))
        assert "burrow-2001-01-01T00-00-00.000.log" not in names
        assert "burrow-2001-01-01T00-00-00.000.log.gz" not in names
        assert "unrelated-2001-01-01T00-00-00.000.log" in names
        assert len([name for name in names if name.startswith("burrow-")]) == 1  # the fresh backup
    finally:
        control.close()
