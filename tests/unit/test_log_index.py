"""The segment indexes' files: entries held in memory and written in groups, cut by truncation."""

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


def entries_on_file(cls, path) -> list[tuple[int, int]]:
    """What an index loaded from ``path`` holds."""
    index = cls(str(path), BASE)
    try:
        return index.entries()
    finally:
        index.close()


MAKERS = {"offset": (offset_index, OffsetIndex, 8), "time": (time_index, TimeIndex, 12)}


def filled(tmp_path, kind: str):
    """An index of ``kind`` with a group of entries written to its file and six more held in memory, its class,
    the size of an entry and the file's path."""
    make, cls, size = MAKERS[kind]
    path = tmp_path / "index"
    return make(path, PENDING_ENTRIES + 6), cls, size, path


@pytest.mark.parametrize("kind", MAKERS)
def test_truncating_into_held_entries_leaves_the_file_alone(tmp_path, kind):
    index, cls, size, path = filled(tmp_path, kind)
    assert os.path.getsize(path) == PENDING_ENTRIES * size
    before = os.stat(path).st_mtime_ns, os.path.getsize(path)
    index.truncate_to(BASE + 10 * (PENDING_ENTRIES + 2))  # keeps two of the held six
    assert len(index) == PENDING_ENTRIES + 2
    assert (os.stat(path).st_mtime_ns, os.path.getsize(path)) == before  # nothing written, nothing cut
    index.close()
    assert entries_on_file(cls, path) == index.entries()


@pytest.mark.parametrize("kind", MAKERS)
def test_truncating_into_written_entries_cuts_the_file_and_drops_the_held_ones(tmp_path, kind):
    index, cls, size, path = filled(tmp_path, kind)
    index.truncate_to(BASE + 10 * 5)  # five entries stay
    assert len(index) == 5 and os.path.getsize(path) == 5 * size
    index.close()  # the held six are gone: nothing more reaches the file
    assert os.path.getsize(path) == 5 * size
    assert entries_on_file(cls, path) == index.entries()


@pytest.mark.parametrize("kind", MAKERS)
def test_entries_appended_after_a_truncation_follow_the_kept_ones(tmp_path, kind):
    index, cls, _, path = filled(tmp_path, kind)
    index.truncate_to(BASE + 10 * (PENDING_ENTRIES + 2))
    if kind == "offset":
        index.append(BASE + 10 * (PENDING_ENTRIES + 2) + 3, 100 * (PENDING_ENTRIES + 2) + 7)
    else:
        index.maybe_append(9_000, BASE + 10 * (PENDING_ENTRIES + 2) + 3)
    index.close()
    reloaded = cls(str(path), BASE)
    assert reloaded.entries() == index.entries() and len(reloaded) == PENDING_ENTRIES + 3
    assert reloaded.is_sane(10**9 if kind == "offset" else BASE + 10**6)
    reloaded.close()


@pytest.mark.parametrize("kind", MAKERS)
def test_a_new_index_empties_a_file_left_at_its_path(tmp_path, kind):
    index, cls, _, path = filled(tmp_path, kind)
    index.close()
    fresh = cls(str(path), BASE, load=False)
    assert len(fresh) == 0 and os.path.getsize(path) == 0
    fresh.close()
    assert entries_on_file(cls, path) == []  # loading keeps what is there: none now
