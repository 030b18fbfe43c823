"""Notification templates: jinja2 with Burrow's template data and helper functions.

A template sees the same data as Burrow's Go templates, under lower-case names:

``cluster``, ``group``
    the group's cluster and name.
``id``
    the incident id ("" when a healthy group is notified because the threshold is OK).
``start``
    the incident start as a timezone-aware UTC ``datetime`` (``None`` without an incident), so
    ``start.strftime("%b %d, %Y %H:%M:%S UTC")`` formats it.
``extras``
    the notifier's ``extras`` map; a missing key reads as "" (as ``index .Extras "key"`` does in Go).
``result``
    the :class:`~burrowpy.protocol.ConsumerGroupStatus`: ``result.status`` (a Status: prints as
    "WARN", compares equal to 2), ``result.complete``, ``result.partitions`` (each with ``topic``,
    ``partition``, ``owner``, ``client_id``, ``status``, ``start``/``end`` offsets with ``offset``,
    ``timestamp``, ``observed_at``, ``lag``, ``current_lag``, ``complete``, and burrowpy's
    ``lag_seconds`` and ``lag_seconds_method`` and the catch-up forecast ``catch_up_forecast``,
    ``catch_up_seconds`` and ``falling_behind_per_second``), ``result.partition_count``, ``result.maxlag``,
    ``result.totallag`` and burrowpy's ``result.max_lag_seconds`` (None when unknown) and the group's
    catch-up forecast (the same three names as a partition's).

Burrow's helper functions exist both as filters and as globals: ``{{ result.partitions | jsonencoder }}``
and ``{{ jsonencoder(result.partitions) }}`` are the same. ``formattimestamp`` takes a strftime format
(Go layouts like "2006-01-02" mean nothing to Python). burrowpy adds ``formatduration``, which writes a
number of seconds as "1h 02m 03s" ("-" for None), for the lag in seconds, and ``formatcatchup``, which
writes a group's or partition's catch-up forecast as "caught up in ~12 min" or "falling behind by 340
records/s" ("keeping pace", "caught up", "-" without a forecast).

Undefined names and attributes are errors rather than empty strings: Burrow's own default close
template referenced a field that does not exist (``.Id``) and sent an empty id for years; here such a
template fails loudly when it is rendered, and the failure is logged with the template's file and line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import jinja2

from burrowpy.config import Section
from burrowpy.protocol import ConsumerGroupStatus, PartitionStatus, Status


class TemplateRenderError(Exception):
    """A template failed while rendering; the message names the template and, when known, the line."""


class Extras(dict):
    """The template's view of ``extras``: a key that is not configured reads as the empty string."""

    def __missing__(self, key: str) -> str:
        return ""


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    return value


def jsonencoder(value: Any) -> str:
    """JSON text of any template value, with Burrow's field names and status strings."""
    return json.dumps(_jsonable(value), separators=(",", ":"))


def topicsbystatus(partitions: Iterable[PartitionStatus]) -> dict[str, list[str]]:
    """Status name -> the distinct topics that have a partition in that status (sorted)."""
    topics: dict[str, set[str]] = {}
    for partition in partitions:
        topics.setdefault(Status.name_of(partition.status), set()).add(partition.topic)
    return {status: sorted(names) for status, names in topics.items()}


def partitioncounts(partitions: Iterable[PartitionStatus]) -> dict[str, int]:
    """How many partitions are in each problem status; OK is not counted, anything unexpected is unknown."""
    counts = {"warn": 0, "stop": 0, "stall": 0, "rewind": 0, "unknown": 0}
    named = {Status.WARN: "warn", Status.STOP: "stop", Status.STALL: "stall", Status.REWIND: "rewind"}
    for partition in partitions:
        if partition.status == Status.OK:
            continue
        counts[named.get(partition.status, "unknown")] += 1
    return counts


def add(a: int, b: int) -> int:
    return int(a) + int(b)


def minus(a: int, b: int) -> int:
    return int(a) - int(b)


def multiply(a: int, b: int) -> int:
    return int(a) * int(b)


def divide(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's ``/`` on integers (Python's ``//`` floors)."""
    a, b = int(a), int(b)
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def maxlag(partition: PartitionStatus | None) -> int:
    """The current lag of a group's ``maxlag`` partition, 0 when the group has none."""
    return partition.current_lag if partition is not None else 0


def formattimestamp(timestamp_ms: int, fmt: str) -> str:
    """A millisecond timestamp formatted in the server's local time with a strftime format."""
    return datetime.fromtimestamp(int(timestamp_ms) / 1000).strftime(fmt)


def formatduration(seconds: float | None) -> str:
    """Seconds as a short duration ("45.2s", "3m 05s", "1h 02m 03s", "2d 04h 00m"); "-" for None."""
    if seconds is None:
        return "-"
    seconds = round(float(seconds), 1)
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h {minutes:02d}m"
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    return f"{minutes}m {secs:02d}s"


def formatcatchup(status: ConsumerGroupStatus | PartitionStatus) -> str:
    """A group's or partition's catch-up forecast for people: "caught up in ~12 min", "falling behind by
    340 records/s", "keeping pace", "caught up"; "-" while there is no forecast."""
    state = status.catch_up_forecast
    if state == "catching_up":
        seconds = status.catch_up_seconds
        assert seconds is not None  # a catching-up forecast has its time (evaluator.forecast.Forecast)
        return f"caught up in ~{_about(seconds)}"
    if state == "falling_behind":
        rate = status.falling_behind_per_second
        assert rate is not None  # a falling-behind forecast has its rate
        # Whole records from 10/s up; below, two significant digits so a slow drift does not read as 0.
        return f"falling behind by {rate:.0f} records/s" if rate >= 10 else f"falling behind by {rate:.2g} records/s"
    if state == "keeping_pace":
        return "keeping pace"
    return "caught up" if state == "caught_up" else "-"


def _about(seconds: float) -> str:
    """A duration rounded to the unit a person would say it in."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 1.5 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


HELPERS = {
    "jsonencoder": jsonencoder,
    "topicsbystatus": topicsbystatus,
    "partitioncounts": partitioncounts,
    "add": add,
    "minus": minus,
    "multiply": multiply,
    "divide": divide,
    "maxlag": maxlag,
    "formattimestamp": formattimestamp,
    "formatduration": formatduration,
    "formatcatchup": formatcatchup,
}


def make_environment(loader: jinja2.BaseLoader | None = None) -> jinja2.Environment:
    """The jinja2 environment every notifier template is compiled in."""
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # the output is JSON, mail or URLs, never HTML built from untrusted input
        keep_trailing_newline=True,
    )
    env.filters.update(HELPERS)
    env.globals.update(HELPERS)
    return env


def resolve_template_path(section: Section, key: str, value: str) -> Path:
    """A relative template path is looked up next to the config file first, then in the working directory."""
    path = Path(value)
    candidates = [path] if path.is_absolute() else [Path(section.file).parent / path, Path.cwd() / path]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(str(c) for c in dict.fromkeys(candidates))
    raise section.error(key, f"template file {value!r} not found (looked for {tried})")


def load_template(section: Section, key: str) -> jinja2.Template:
    """Compile the template file named by ``section[key]``; any problem is a ConfigError naming the key."""
    path = resolve_template_path(section, key, section.get_str(key))
    env = make_environment(jinja2.FileSystemLoader(str(path.parent)))
    try:
        return env.get_template(path.name)
    except jinja2.TemplateSyntaxError as exc:
        hint = ""
        if "{{." in (exc.source or "") or "{{ ." in (exc.source or ""):
            hint = " (this looks like a Go template from Burrow: burrowpy templates are jinja2, " \
                   "e.g. {{ result.group }} instead of {{.Result.Group}})"
        raise section.error(key, f"template {path} line {exc.lineno}: {exc.message}{hint}") from None
    except (OSError, UnicodeDecodeError, jinja2.TemplateError) as exc:
        raise section.error(key, f"cannot load template {path}: {exc}") from None


def compile_inline(section: Section, key: str) -> jinja2.Template:
    """Compile a template given inline as the value of ``section[key]`` (the http notifier's URLs)."""
    source = section.get_str(key)
    try:
        return make_environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise section.error(key, f"bad template {source!r}: {exc.message}") from None


def template_data(status: ConsumerGroupStatus, incident_id: str, start: float | None,
                  extras: Mapping[str, str]) -> dict[str, Any]:
    """The variables a notification template is rendered with."""
    return {
        "cluster": status.cluster,
        "group": status.group,
        "kind": status.kind,
        "id": incident_id,
        "start": datetime.fromtimestamp(start, UTC) if start is not None else None,
        "extras": Extras(extras),
        "result": status,
    }


def render(template: jinja2.Template, data: Mapping[str, Any]) -> str:
    """Render, turning any failure into a TemplateRenderError that says where the template broke."""
    try:
        return template.render(data)
    except Exception as exc:  # a template can raise anything its expressions raise; all are its fault
        raise TemplateRenderError(f"{_describe(template, exc)}: {type(exc).__name__}: {exc}") from exc


def _describe(template: jinja2.Template, exc: BaseException) -> str:
    # jinja2 rewrites the traceback of a failed render so that the template's own frames carry its file
    # name (or "<template>" for an inline one) and its source line numbers.
    code_name = template.filename or "<template>"
    line = None
    traceback = exc.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == code_name:
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    name = template.filename or template.name or "<inline template>"
    return f"template {name} line {line}" if line else f"template {name}"
