"""The ``status`` object of ``/status`` and ``/lag`` written straight from the evaluation, as
``gojson.dumps(status.to_json())`` writes it, byte for byte.

A 1,000-partition group in WARN or ERR lists every partition, and going through a dict per partition
and offset and then the general encoder cost four times what the rules do (about 20 us a partition);
here a partition is one ``%`` format of its already encoded fields. Any field of an unexpected type
(an int subclass, a float outside float32's range) is written by the general encoder, so the output is
always what it would write, and what it refuses is still refused.

:func:`evaluation_json` writes the same from a group's evaluation without making the status objects at all:
what a partition shows that no clock moves (its topic, number, owner, client id, first and last commit, lag,
complete, lag-in-seconds method) is encoded once per evaluation basis and kept with it
(:class:`burrowpy.evaluator.group.PartitionFields`), and an answer puts each listed partition's kept pieces
between the figures of this evaluation (its status, lag in seconds, forecast), one join for the whole list. The
pieces are made when an answer lists at least a quarter of a topic's partitions (``/lag``, or ``/status`` of a
topic in trouble); fewer (``maxlag``, a few problems) are written from their objects, as :func:`status_json` does.
"""

from __future__ import annotations

from typing import Any

from burrowpy.evaluator.forecast import Forecast
from burrowpy.evaluator.group import GroupEvaluation, TopicEvaluation
from burrowpy.httpserver.gojson import dumps, encode_string, format_float32
from burrowpy.protocol import ConsumerGroupStatus, ConsumerOffset, PartitionStatus, Status

# An exact int is given to ``%s`` as it is: str() writes what int.__repr__ writes.
_OFFSET = '{"offset":%s,"timestamp":%s,"observedAt":%s,"lag":%s}'
_PARTITION = ('{"topic":%s,"partition":%s,"owner":%s,"client_id":%s,"status":%s,"start":%s,"end":%s,'
              '"current_lag":%s,"complete":%s,"lag_seconds":%s,"lag_seconds_method":%s,'
              '"catch_up_forecast":%s,"catch_up_seconds":%s,"falling_behind_per_second":%s}')
_GROUP = ('{"cluster":%s,"group":%s,"status":%s,"complete":%s,"partitions":[%s],"partition_count":%s,'
          '"maxlag":%s,"totallag":%s,"max_lag_seconds":%s,"catch_up_forecast":%s,"catch_up_seconds":%s,'
          '"falling_behind_per_second":%s}')


def _value(value: Any) -> str:
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if kind is str:
        return encode_string(value)
    if value is None:
        return "null"
    if kind is float:
        return format_float32(value)
    return dumps(value)


_STATUS = {status: encode_string(status.name) for status in Status}
_TEXT: dict[Any, str] = {None: "null"}
_TEXT_LIMIT = 4096


def _offset(offset: ConsumerOffset | None) -> str:
    if offset is None:
        return "null"
    number, timestamp, observed_at, lag = offset[:4]
    if type(number) is int and type(timestamp) is int and type(observed_at) is int:
        return _OFFSET % (number, timestamp, observed_at, "null" if lag is None else _value(lag))
    return _OFFSET % (_value(number), _value(timestamp), _value(observed_at), _value(lag))


def _text(value: Any) -> str:
    """A string field: the same few owners, client ids and method names come back in every partition."""
    text = _TEXT.get(value)
    if text is None:
        text = _value(value)
        if type(value) is str:
            if len(_TEXT) >= _TEXT_LIMIT:
                _TEXT.clear()
            _TEXT[value] = text
    return text


def partition_json(partition: PartitionStatus) -> str:
    """What ``gojson.dumps(partition.to_json())`` writes."""
    number = partition.partition
    current_lag = partition.current_lag
    complete = partition.complete
    return _PARTITION % (
        _text(partition.topic), number if type(number) is int else _value(number), _text(partition.owner),
        _text(partition.client_id), _STATUS.get(partition.status) or _value(partition.status.name), _offset(partition.start), _offset(partition.end),
        current_lag if type(current_lag) is int else _value(current_lag),
        _value(complete), _value(partition.lag_seconds), _text(partition.lag_seconds_method),
        _text(partition.catch_up_forecast), _value(partition.catch_up_seconds),
        _value(partition.falling_behind_per_second))


def status_json(status: ConsumerGroupStatus) -> str:
    """What ``gojson.dumps(status.to_json())`` writes; ValueError or TypeError where that raises."""
    return _GROUP % (
        _value(status.cluster), _value(status.group), _value(status.status.name), _value(status.complete),
        ",".join([partition_json(partition) for partition in status.partitions]),
        _value(status.partition_count), "null" if status.maxlag is None else partition_json(status.maxlag),
        _value(status.totallag), _value(status.max_lag_seconds), _value(status.catch_up_forecast),
        _value(status.catch_up_seconds), _value(status.falling_behind_per_second))


# --- from the evaluation's columns -------------------------------------------------------------------

_OK_CODE = Status.OK.value
_CODE_TEXT = tuple(encode_string(status.name) for status in Status)  # by code (Status values are 0, 1, ...)
# A partition's pieces: what comes before its status, between its status and its lag in seconds, and between that
# and its forecast; each head starts with the comma that separates it from the partition before it.
_HEAD = ',{"topic":%s,"partition":%s,"owner":%s,"client_id":%s,"status":'
_MIDDLE = ',"start":%s,"end":%s,"current_lag":%s,"complete":%s,"lag_seconds":'
_TAIL = ',"lag_seconds_method":%s,"catch_up_forecast":'
_FORECAST = '%s,"catch_up_seconds":%s,"falling_behind_per_second":%s}'
# A forecast's text (to the partition's closing brace) by the forecast: most partitions of a group share a few.
# The evaluator's forecasts hold a str or None and floats or None only (round() of floats), so no two of them are
# equal with texts that differ (as 1 and 1.0 or True would be); only such ones are kept.
_FORECAST_TEXT: dict[Forecast | None, str] = {None: _FORECAST % ("null", "null", "null")}
_FORECAST_LIMIT = 4096
_PLAIN = (str, float, type(None))


def _figure(value: float | None) -> str:
    """A lag in seconds."""
    if value is None:
        return "null"
    if value.__class__ is float:
        return format_float32(value)
    return _value(value)


def _forecast(forecast: Forecast | None) -> str:
    text = _FORECAST_TEXT.get(forecast)
    if text is None:
        assert forecast is not None
        state, seconds, growth = forecast
        text = _FORECAST % (_text(state), _value(seconds), _value(growth))
        if state.__class__ in _PLAIN and seconds.__class__ in _PLAIN and growth.__class__ in _PLAIN:
            if len(_FORECAST_TEXT) >= _FORECAST_LIMIT:
                _FORECAST_TEXT.clear()
                _FORECAST_TEXT[None] = _FORECAST % ("null", "null", "null")
            _FORECAST_TEXT[forecast] = text
    return text


def _kept_pieces(topic: TopicEvaluation) -> tuple[list[str], list[str], list[str]]:
    """Every partition's head, middle and tail (see ``_HEAD``) of the topic's basis, made on the first answer
    and kept with the basis."""
    fields = topic.fields
    kept: tuple[list[str], list[str], list[str]] | None = fields.encoded
    if kept is None:
        owners, client_ids, completes, starts, ends = fields.read()
        name = _value(topic.topic)
        heads = [_HEAD % (name, _value(number), _text(owner), _text(client_id))
                 for number, (owner, client_id) in enumerate(zip(owners, client_ids, strict=True))]
        middles = [_MIDDLE % (_offset(start), _offset(end), _value(lag), _value(complete))
                   for start, end, lag, complete in zip(starts, ends, topic.lags, completes, strict=True)]
        tail_of = {method: _TAIL % _text(method) for method in set(topic.methods)}  # a few methods: shared texts
        tails = list(map(tail_of.__getitem__, topic.methods))
        kept = fields.encoded = (heads, middles, tails)
    return kept


def _topic_pieces(topic: TopicEvaluation, indexes: list[int] | None) -> list[str]:
    """The listed partitions of a topic (every one for None) as pieces to join, each after a comma."""
    if topic.fields.encoded is None and indexes is not None and 4 * len(indexes) < len(topic.codes):
        # A few of the topic's partitions (maxlag, a /status listing some problems): their objects, rather than
        # every partition's pieces made (and kept) for them.
        return ["," + partition_json(partition) for partition in topic.partitions(indexes)]
    heads, middles, tails = _kept_pieces(topic)
    codes, seconds, forecasts = topic.codes, topic.seconds, topic.forecasts
    if indexes is not None:
        heads, middles, tails = [heads[i] for i in indexes], [middles[i] for i in indexes], [tails[i] for i in indexes]
        codes, seconds, forecasts = [codes[i] for i in indexes], [seconds[i] for i in indexes], [
            forecasts[i] for i in indexes]
    pieces: list[str] = [""] * (6 * len(heads))
    pieces[0::6] = heads
    pieces[1::6] = map(_CODE_TEXT.__getitem__, codes)
    pieces[2::6] = middles
    pieces[3::6] = map(_figure, seconds)
    pieces[4::6] = tails
    pieces[5::6] = map(_forecast, forecasts)
    return pieces


def evaluation_json(evaluation: GroupEvaluation, showall: bool) -> str:
    """What ``status_json(evaluation.result(showall))`` writes (every partition listed, or with ``showall`` False
    those worse than OK), without the status objects; ValueError or TypeError where that raises."""
    pieces: list[str] = []
    for topic in evaluation.topics:
        if showall:
            pieces += _topic_pieces(topic, None)
        else:
            listed = [index for index, code in enumerate(topic.codes) if code > _OK_CODE]
            if listed:
                pieces += _topic_pieces(topic, None if len(listed) == len(topic.codes) else listed)
    if pieces:
        pieces[0] = pieces[0][1:]  # the first partition's comma
    maxlag = "null"
    if evaluation.maxlag_at is not None:
        topic, index = evaluation.maxlag_at
        maxlag = "".join(_topic_pieces(topic, [index]))[1:]
    catch_up_forecast, catch_up_seconds, falling_behind = evaluation.forecast or (None, None, None)
    return _GROUP % (
        _value(evaluation.cluster), _value(evaluation.group), _value(evaluation.status.name),
        _value(evaluation.complete), "".join(pieces), _value(evaluation.partition_count), maxlag,
        _value(evaluation.totallag), _value(evaluation.max_lag_seconds), _value(catch_up_forecast),
        _value(catch_up_seconds), _value(falling_behind))
