"""A TCP relay for tests that need a network fault without restarting a server.

    with TcpRelay("127.0.0.1", zk.port) as relay:
        client = KazooClient(hosts=relay.address)
        relay.cut()       # every relayed connection is closed; new ones are closed at once
        relay.restore()   # connections are relayed again

The relay runs in its own thread (one ``selectors`` loop), so it works the same under asyncio tests
and thread-based clients. Restarting a JVM to drop a connection also restarts its timers and its
start-up time on a busy machine; cutting the wire drops the connection and nothing else.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections import deque

from harness import free_port


class TcpRelay:
    def __init__(self, target_host: str, target_port: int, *, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.target = (target_host, target_port)
        self.host = host
        self.port = port or free_port(host)
        self._cut = threading.Event()
        self._stop = threading.Event()
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._clients: set[socket.socket] = set()  # the accepted side of each pair
        self._selector = selectors.DefaultSelector()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.connections = 0  # connections relayed so far (cut ones not counted)
        self.errors: list[BaseException] = []  # anything unexpected the relay loop survived
        self.history: deque[str] = deque(maxlen=500)  # what the relay did, with times, for a failing test's message
        self._started = time.monotonic()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> TcpRelay:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._selector.register(listener, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._run, name=f"tcp-relay-{self.port}", daemon=True)
        self._thread.start()
        return self

    def cut(self) -> None:
        """Close every relayed connection and refuse new ones until ``restore``."""
        self._note("cut")
        self._cut.set()

    def restore(self) -> None:
        self._note("restored")
        self._cut.clear()

    def _note(self, what: str) -> None:
        self.history.append(f"{time.monotonic() - self._started:8.3f}s {what}")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for sock in list(self._pairs):
            self._close(sock)
        if self._listener is not None:
            self._selector.unregister(self._listener)
            self._listener.close()
        self._selector.close()

    def _run(self) -> None:
        # The loop must outlive any one connection's trouble: if it died, later clients would sit in
        # the listen backlog unanswered, which looks like a hung server rather than a cut wire.
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as exc:  # noqa: BLE001 (kept for the test to report)
                self.errors.append(exc)

    def _step(self) -> None:
        if self._cut.is_set() and self._pairs:
            for sock in list(self._pairs):
                self._close(sock)
        for key, _ in self._selector.select(0.05):
            sock = key.fileobj
            if sock is self._listener:
                self._accept()
            elif sock in self._pairs:
                self._relay(sock)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:  # nothing pending, or the client gave up before it was accepted
            return
        if self._cut.is_set():
            self._note("refused a connection (cut)")
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError as exc:
            self._note(f"could not reach the target: {exc!r}")
            client.close()
            return
        try:
            for sock in (client, upstream):
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:  # the client reset the connection already
            client.close()
            upstream.close()
            return
        self._pairs[client] = upstream
        self._clients.add(client)
        self._pairs[upstream] = client
        self._selector.register(client, selectors.EVENT_READ)
        self._selector.register(upstream, selectors.EVENT_READ)
        self.connections += 1
        self._note(f"relaying connection {self.connections}")

    def _relay(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(sock)
            return
        peer = self._pairs[sock]
        self._note(f"{len(data)} bytes {'to' if sock in self._clients else 'from'} the target")
        try:
            # Small test traffic: a blocking send of the chunk keeps the relay simple.
            peer.setblocking(True)
            peer.sendall(data)
            peer.setblocking(False)
        except OSError:
            self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        peer = self._pairs.pop(sock, None)
        for s in (sock, peer):
            if s is None:
                continue
            self._pairs.pop(s, None)
            self._clients.discard(s)
            try:
                self._selector.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def __enter__(self) -> TcpRelay:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
