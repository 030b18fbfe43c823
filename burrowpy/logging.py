"""Log output of the monitor daemon: structlog on top of the standard library's handlers.

JSON lines in production (and always in a log file), a human console format when standard output is a
terminal. A log file rotates like Burrow's (lumberjack): past ``maxsize`` MB the file is renamed with a
timestamp, optionally gzipped, and backups beyond ``maxbackups`` or older than ``maxage`` days are removed.
The level can be changed while running (``/v3/admin/loglevel``); it uses Burrow's names.
"""

from __future__ import annotations

import gzip
import logging
import logging.handlers
import os
import re
import shutil
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

import structlog

from burrowpy.config import LoggingConfig

PANIC = 45  # zap's panic level sits between error and fatal; the standard library has no name for it

# Names Burrow accepts (config and /v3/admin/loglevel), and the name it reports for each level.
LEVEL_NUMBERS = {"debug": logging.DEBUG, "trace": logging.DEBUG, "info": logging.INFO,
                 "warn": logging.WARNING, "warning": logging.WARNING, "error": logging.ERROR,
                 "panic": PANIC, "fatal": logging.CRITICAL}
LEVEL_NAMES = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn", logging.ERROR: "error",
               PANIC: "panic", logging.CRITICAL: "fatal"}


def parse_level(name: str) -> int | None:
    return LEVEL_NUMBERS.get(name.strip().lower())


class RotatingLogFile(logging.handlers.RotatingFileHandler):
    """A log file rotated by size; backups are named ``NAME-<timestamp>.EXT`` as lumberjack names them."""

    def __init__(self, settings: LoggingConfig) -> None:
        directory = os.path.dirname(os.path.abspath(settings.filename))
        os.makedirs(directory, exist_ok=True)
        # backupCount only has to be non-zero for the base class to call doRollover; pruning is ours.
        super().__init__(settings.filename, maxBytes=settings.maxsize * 1024 * 1024, backupCount=1,
                         encoding="utf-8")
        self.settings = settings
        self._housekeeping: threading.Thread | None = None

    def _now(self) -> datetime:
        return datetime.now() if self.settings.use_localtime else datetime.now(UTC)

    def backup_pattern(self) -> re.Pattern[str]:
        base, ext = os.path.splitext(os.path.basename(self.baseFilename))
        return re.compile(rf"^{re.escape(base)}-(\d{{4}}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{{3}}){re.escape(ext)}(\.gz)?$")

    def doRollover(self) -> None:
        if self.stream:
            self.stream.close()
            self.stream = None  # type: ignore[assignment]
        base, ext = os.path.splitext(self.baseFilename)
        stamp = self._now().strftime("%Y-%m-%dT%H-%M-%S.%f")[:-3]
        backup = f"{base}-{stamp}{ext}"
        if os.path.exists(self.baseFilename):
            os.replace(self.baseFilename, backup)
        self.stream = self._open()
        # Compressing a 100 MB file takes a while: do it (and the pruning) off the logging thread.
        self.wait_housekeeping()
        self._housekeeping = threading.Thread(target=self._compress_and_prune, args=(backup,),
                                              name="log-rotation", daemon=True)
        self._housekeeping.start()

    def wait_housekeeping(self) -> None:
        if self._housekeeping is not None:
            self._housekeeping.join()
            self._housekeeping = None

    def _compress_and_prune(self, backup: str) -> None:
        if self.settings.use_compression and os.path.exists(backup):
            with open(backup, "rb") as source, gzip.open(backup + ".gz", "wb") as target:
                shutil.copyfileobj(source, target)
            os.remove(backup)
        self.prune()

    def prune(self) -> None:
        directory = os.path.dirname(self.baseFilename)
        pattern = self.backup_pattern()
        backups = []
        for name in os.listdir(directory):
            match = pattern.match(name)
            if match:
                backups.append((match.group(1), os.path.join(directory, name)))
        backups.sort(reverse=True)  # the timestamp format sorts newest first
        cutoff = ""
        if self.settings.maxage > 0:
            cutoff = (self._now() - timedelta(days=self.settings.maxage)).strftime("%Y-%m-%dT%H-%M-%S.000")
        for index, (stamp, path) in enumerate(backups):
            too_many = self.settings.maxbackups > 0 and index >= self.settings.maxbackups
            if too_many or stamp < cutoff:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        self.wait_housekeeping()
        super().close()


class LevelCheckedLogger(structlog.stdlib.BoundLogger):
    """structlog's standard-library logger whose debug calls below the level return at once. The base class builds
    the event (its keys bound and given) and runs the processors, the first of which (``filter_by_level``) drops it:
    about 5 µs a call, which the evaluator's debug line after every group's evaluation paid 4,000 times an idle
    refresh period at fleet scale (the dashboard's two rounds of 2,000 groups). The level is read at every call,
    as that processor reads it, so ``/v3/admin/loglevel`` still takes effect at once."""

    def debug(self, event: str | None = None, *args: Any, **kw: Any) -> Any:
        logger = self._logger
        if logger.disabled or logger.getEffectiveLevel() > logging.DEBUG:
            return None
        return super().debug(event, *args, **kw)


class LogControl:
    """The log output of one daemon and its run-time level.

    ``logger`` is the structlog logger every module binds from. Records of libraries that log through the
    standard library (aiohttp, kazoo, aiokafka) are formatted the same way when ``capture_libraries`` is set.
    """

    def __init__(self, settings: LoggingConfig, *, stream: TextIO | None = None, name: str = "burrowpy",
                 capture_libraries: bool = False) -> None:
        self.settings = settings
        if settings.filename:
            self.handler: logging.Handler = RotatingLogFile(settings)
            console = False
        else:
            stream = stream if stream is not None else sys.stdout
            self.handler = logging.StreamHandler(stream)
            console = _is_terminal(stream)
        timestamper = structlog.processors.TimeStamper(fmt="iso", utc=not settings.use_localtime)
        renderer: list[Any] = ([structlog.dev.ConsoleRenderer(colors=True)] if console else
                               [structlog.processors.format_exc_info, structlog.processors.JSONRenderer()])
        self.handler.setFormatter(structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *renderer],
            foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name, timestamper],
        ))
        self._loggers = [logging.getLogger(name)]
        if capture_libraries:
            self._loggers.append(logging.getLogger())
        for stdlib_logger in self._loggers:
            stdlib_logger.addHandler(self.handler)
        # Our records reach the handler once, not again through the root logger.
        self._loggers[0].propagate = False
        self._level = parse_level(settings.level) or logging.INFO
        self._apply_level()
        self.logger = structlog.wrap_logger(
            self._loggers[0],
            processors=[structlog.stdlib.filter_by_level, structlog.stdlib.add_log_level, timestamper,
                        structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
            wrapper_class=LevelCheckedLogger,
        )

    def _apply_level(self) -> None:
        for stdlib_logger in self._loggers:
            stdlib_logger.setLevel(self._level)

    @property
    def level(self) -> str:
        return LEVEL_NAMES.get(self._level, logging.getLevelName(self._level).lower())

    def set_level(self, name: str) -> bool:
        """Change the level by one of Burrow's names; False (and no change) for an unknown name."""
        level = parse_level(name)
        if level is None:
            return False
        self._level = level
        self._apply_level()
        return True

    def close(self) -> None:
        for stdlib_logger in self._loggers:
            stdlib_logger.removeHandler(self.handler)
        self.handler.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def redirect_stdout(filename: str) -> None:
    """Burrow's ``general.stdout-logfile``: keep an existing file under a dated name, then send file
    descriptors 1 and 2 (so crashes and library prints too) to a fresh one."""
    if os.path.exists(filename):
        os.replace(filename, filename + "." + time.strftime("%Y-%m-%d_%H:%M:%S"))
    descriptor = os.open(filename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)
