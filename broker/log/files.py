"""Small durable files (checkpoints and metadata written whole, so a crash leaves the old or the new), and
disk space reserved for segment files ahead of their writes."""

from __future__ import annotations

import ctypes
import errno
import os
import threading

TEMP_SUFFIX = ".tmp"
PRIVATE_MODE = 0o600
# Writers of one file take turns (a lock per stripe of file names): two threads writing the same file at once
# shared its temporary file, and the second's rename failed once the first had taken it (a producer snapshot
# written by a roll's last step on the roller while the log closed).
_WRITE_TURNS = tuple(threading.Lock() for _ in range(64))


def fsync_directory(directory: str) -> None:
    """Make renames and creations inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: str, data: bytes, *, durable: bool = True, private: bool = False) -> None:
    """Replace ``path`` with ``data``: write a temporary file and rename it over.

    ``durable`` also fsyncs the file and the directory, so the new content survives a power loss. Files
    that are only hints (losing the update merely costs extra recovery work) skip that. ``private`` files
    (credentials, ACLs) are readable by their owner only, from the moment they exist.
    """
    with _WRITE_TURNS[hash(path) % len(_WRITE_TURNS)]:
        _write_and_rename(path, data, durable=durable, private=private)
    if durable:
        fsync_directory(os.path.dirname(path) or ".")


def _write_and_rename(path: str, data: bytes, *, durable: bool, private: bool) -> None:
    temp = path + TEMP_SUFFIX
    if private:
        # A temporary file left by a crash keeps its old mode, and whoever opened it then could read on.
        unlink_quietly(temp)
        handle = os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE), "wb")
    else:
        handle = open(temp, "wb")  # noqa: SIM115 (closed by the with below)
    with handle as f:
        f.write(data)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.replace(temp, path)


def read_int(path: str) -> int | None:
    """The integer a checkpoint file holds, or None if it is missing or damaged."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def keep_private(path: str) -> None:
    """Make a file that holds secrets the owner's only (one written before burrowpy made it so)."""
    if os.path.exists(path) and os.stat(path).st_mode & 0o777 != PRIVATE_MODE:
        os.chmod(path, PRIVATE_MODE)


def unlink_quietly(*paths: str) -> None:
    """Remove files that may already be gone."""
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


# fallocate(2) with FALLOC_FL_KEEP_SIZE reserves blocks without changing the file's size, so that the size stays
# the end of the data written (readers, recovery and the indexes go by it) while the blocks past it are the
# disk's reservation for the writes to come.
_FALLOC_FL_KEEP_SIZE = 0x01
_libc = ctypes.CDLL(None, use_errno=True)
_fallocate = getattr(_libc, "fallocate", None)
if _fallocate is not None:
    _fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    _fallocate.restype = ctypes.c_int
_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def reserve_space(fd: int, offset: int, length: int) -> bool:
    """Allocate disk blocks for ``length`` bytes at ``offset`` without changing the file's size.

    False where the file system (or the platform) cannot; the file is then written as before. A full disk
    raises OSError(ENOSPC), as the write itself would.
    """
    if _fallocate is None:
        return False
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code))


def release_space_after(fd: int, end: int) -> None:
    """Free the blocks reserved past ``end``, the file's size, keeping the file's modification time (which
    time-based retention falls back on for segments without record timestamps).

    A truncation to the file's own size does it (a hole punched past the end does not, on ext4)."""
    times = os.fstat(fd)
    os.ftruncate(fd, end)
    os.utime(fd, ns=(times.st_atime_ns, times.st_mtime_ns))
