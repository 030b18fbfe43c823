"""The ``status`` object of ``/status`` and ``/lag`` written straight from the evaluation, as
``gojson.dumps(status.to_json())`` writes it, byte for byte.

A 1,000-partition group in WARN or ERR lists every partition, and going through a dict per partition
and offset and then the general encoder cost four times what the rules do (about 20 us a partition);
here a partition is one ``%`` format of its already encoded fields. Any field of an unexpected type
(an int subclass, a float outside float32's range) is written by the general encoder, so the output is
always what it would write, and what it refuses is still refused.
"""

from __future__ import annotations

from typing import Any

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
