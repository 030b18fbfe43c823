"""Reading whole batches out of a segment, cut by bytes and by offset, against the plain definition: walk
every batch from the read position and keep those that fit (what the index-assisted read must equal)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.segment import LogSegment
from broker.protocol.records import HEADER_SIZE, Record, build_batch, iter_batches


def walk_every_batch(data: bytes, position: int, max_bytes: int, max_offset: int,
                     at_least_one: bool) -> tuple[bytes, bool]:
    taken = position
    for start, header in iter_batches(data, position):
        if header.base_offset >= max_offset:
            return data[position:taken], False
        if start + header.size - position > max_bytes and not (at_least_one and start == position):
            return data[position:taken], False
        taken = start + header.size
    read = data[position:taken]
    return read, taken == len(data) and len(read) < max_bytes


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 300)), min_size=1, max_size=40),
    index_interval=st.sampled_from([0, 64, 512, 4096]),
    start_batch=st.integers(0, 39),
    max_bytes=st.integers(0, 20_000),
    offset_cut=st.integers(0, 1_700),
    at_least_one=st.booleans(),
)
def test_reads_equal_walking_every_batch(tmp_path_factory, sizes, index_interval, start_batch, max_bytes,
                                         offset_cut, at_least_one):
    directory = str(tmp_path_factory.mktemp("segment"))
    segment = LogSegment.create(directory, 100, index_interval, 0)
    offset, positions, data = 100, [], b""
    for count, value_size in sizes:
        batch = build_batch([Record(offset + i, 1000 + i, None, b"v" * value_size) for i in range(count)],
                            base_offset=offset)
        positions.append(len(data))
        segment.append([batch], offset, offset + count, 1000 + count)
        data += batch
        offset += count
    position = positions[min(start_batch, len(positions) - 1)]
    max_offset = 100 + offset_cut
    try:
        got = segment.read_batches(position, max_bytes, max_offset, at_least_one)
        expected = walk_every_batch(data, position, max_bytes, max_offset, at_least_one)
        if len(expected[0]) < HEADER_SIZE and not expected[0]:
            assert got[0] == b""
        assert got == expected
    finally:
        segment.close()
