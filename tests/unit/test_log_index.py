"""The segment indexes' files: a new index starts from an empty file, a loaded one from what its file holds."""

import os

import pytest

from broker.log.index import PENDING_ENTRIES, OffsetIndex, TimeIndex

BASE = 1000


def offset_index(path, count: int) -> OffsetIndex:
    index = OffsetIndex(str(path), BASE, load=False)
    for n in range(count):
        index.append(BASE + 10 * n, 100 * n)
    return index


def time_index(path, count: int) -> TimeIndex:
    index = TimeIndex(str(path), BASE, load=False)
    for n in range(count):
        index.maybe_append(5_000 + n, BASE + 10 * n)
    return index


MAKERS = {"offset": (offset_index, OffsetIndex), "time": (time_index, TimeIndex)}


def entries_on_file(cls, path) -> list[tuple[int, int]]:
    """What an index loaded from ``path`` holds."""
    index = cls(str(path), BASE)
    try:
        return index.entries()
    finally:
        index.close()


@pytest.mark.parametrize("kind", MAKERS)
def test_a_loaded_index_holds_every_entry_of_the_closed_one(tmp_path, kind):
    make, cls = MAKERS[kind]
    path = tmp_path / "index"
    index = make(path, PENDING_ENTRIES + 6)  # a group of entries written to the file, six held in memory
    index.close()
    assert entries_on_file(cls, path) == index.entries() and len(index) == PENDING_ENTRIES + 6


@pytest.mark.parametrize("kind", MAKERS)
def test_a_new_index_empties_a_file_left_at_its_path(tmp_path, kind):
    make, cls = MAKERS[kind]
    path = tmp_path / "index"
    make(path, PENDING_ENTRIES + 6).close()
    fresh = cls(str(path), BASE, load=False)
    assert len(fresh) == 0 and os.path.getsize(path) == 0
    fresh.close()
    assert entries_on_file(cls, path) == []  # loading keeps what is there: none now
