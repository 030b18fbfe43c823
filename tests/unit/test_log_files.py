"""Small files written whole (``write_atomically``) by two threads at once: each write ends with the file whole,
one of the two contents, and neither fails. Both went through one temporary file, and the second's rename failed
once the first had renamed it (seen in CI: a roll's producer snapshot on the roller while its log closed)."""

from __future__ import annotations

import threading

from broker.log.files import write_atomically


def test_two_threads_writing_one_file_both_succeed(tmp_path):
    path = str(tmp_path / "00000000000000000000.snapshot")
    failures: list[BaseException] = []
    start = threading.Barrier(2)

    def writer(content: bytes) -> None:
        start.wait()
        try:
            for _ in range(400):
                write_atomically(path, content, durable=False)
        except BaseException as exc:  # noqa: BLE001 (reported by the test)
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(content,)) for content in (b"a" * 4096, b"b" * 4096)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures[:1]
    with open(path, "rb") as f:
        assert f.read() in (b"a" * 4096, b"b" * 4096)
