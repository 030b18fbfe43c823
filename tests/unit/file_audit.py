"""The file system changes a thread makes, seen through audit hooks (PEP 578): for tests that show a piece of work
changes no file on the calling thread (the broker's event loop), without guessing it from a directory's contents.
The hook is installed once for the process and costs a dictionary look-up per audited event on other threads."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# os.ftruncate raises os.truncate, os.unlink os.remove, os.replace os.rename
_CHANGING = {"os.truncate", "os.rename", "os.remove", "os.mkdir", "os.rmdir", "os.chmod"}
_WATCHED: dict[int, Callable[[str, object], None]] = {}


def _audit(event: str, args: tuple) -> None:
    seen = _WATCHED.get(threading.get_ident())
    if seen is None:
        return
    if event == "open":  # named "create" when it may create the file
        flags = args[2] if isinstance(args[2], int) else 0
        if flags & os.O_CREAT:
            seen("create", args[0])
        elif flags & _WRITING or isinstance(args[1], str) and set(args[1]) & set("wax+"):
            seen(event, args[0])
    elif event in _CHANGING:
        seen(event, args[0])


sys.addaudithook(_audit)


@contextmanager
def file_changes(before: Callable[[str, object], None] | None = None) -> Iterator[list[tuple[str, object]]]:
    """The file system changes this thread makes meanwhile (an open for writing, "create" if it may create the
    file, a truncation, a rename, a removal, a directory made or removed), each handed to ``before`` before it is
    made."""
    changes: list[tuple[str, object]] = []
    me = threading.get_ident()

    def seen(event: str, path: object) -> None:
        changes.append((event, path))
        if before is not None:
            del _WATCHED[me]  # what ``before`` changes itself is not watched
            try:
                before(event, path)
            finally:
                _WATCHED[me] = seen

    _WATCHED[me] = seen
    try:
        yield changes
    finally:
        _WATCHED.pop(me, None)
