"""Records left in log files (FileRegion): encoded frames equal those built from the same bytes, and the
region's descriptors are closed once read, once closed, or when it is dropped unsent."""

from __future__ import annotations

import gc
import os

import pytest

from broker.protocol.api import ApiKey, EncodeError, encode_response, encode_response_chunks
from broker.protocol.types import FileRegion


def fetch_answer(records) -> dict:
    return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": [{"topic": "t", "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 9, "last_stable_offset": 9, "log_start_offset": 0,
         "aborted_transactions": None, "preferred_read_replica": -1, "records": records}]}]}


def region_of(path, pieces) -> FileRegion:
    return FileRegion([(os.open(path, os.O_RDONLY), position, length) for position, length in pieces])


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@pytest.mark.parametrize("version", [4, 11, 12])
def test_frames_with_regions_equal_frames_with_bytes(tmp_path, version):
    path = tmp_path / "segment"
    path.write_bytes(bytes(range(256)) * 4)
    expected = encode_response(ApiKey.FETCH, version, 7, fetch_answer(path.read_bytes()[10:110] + path.read_bytes()[500:520]))
    assert encode_response(ApiKey.FETCH, version, 7, fetch_answer(region_of(path, [(10, 100), (500, 20)]))) == expected
    chunks = encode_response_chunks(ApiKey.FETCH, version, 7, fetch_answer(region_of(path, [(10, 100), (500, 20)])))
    regions = [chunk for chunk in chunks if isinstance(chunk, FileRegion)]
    assert len(regions) == 1
    assert b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks) == expected


def test_descriptors_are_closed_when_read_closed_or_dropped(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 100)
    read = region_of(path, [(0, 10)])
    fd = read.pieces[0][0]
    assert read.read() == b"x" * 10 and not is_open(fd)
    closed = region_of(path, [(0, 10)])
    fd = closed.pieces[0][0]
    closed.close()
    closed.close()
    assert not is_open(fd)
    dropped = region_of(path, [(0, 10)])
    fd = dropped.pieces[0][0]
    del dropped
    gc.collect()
    assert not is_open(fd)


def test_a_log_that_shrank_cannot_make_a_frame_of_the_announced_size(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 100)
    region = region_of(path, [(50, 50)])
    os.truncate(path, 60)
    with pytest.raises(EncodeError, match="shrank"):
        encode_response(ApiKey.FETCH, 12, 1, fetch_answer(region))
