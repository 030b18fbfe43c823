"""Small durable files: checkpoints and metadata written whole, so a crash leaves the old or the new."""

from __future__ import annotations

import os

TEMP_SUFFIX = ".tmp"


def fsync_directory(directory: str) -> None:
    """Make renames and creations inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data``: write a temporary file and rename it over.

    ``durable`` also fsyncs the file and the directory, so the new content survives a power loss. Files
    that are only hints (losing the update merely costs extra recovery work) skip that.
    """
    temp = path + TEMP_SUFFIX
    with open(temp, "wb") as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(temp, path)
    if durable:
        fsync_directory(os.path.dirname(path) or ".")


def read_int(path: str) -> int | None:
    """The integer a checkpoint file holds, or None if it is missing or damaged."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def unlink_quietly(*paths: str) -> None:
    """Remove files that may already be gone."""
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
