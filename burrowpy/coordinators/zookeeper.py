"""The ZooKeeper coordinator: one kazoo session for the daemon, and locks that follow that session.

Config (the ``zookeeper`` block, burrow-spec 8): ``servers`` (required host:port list), ``timeout``
(session timeout, seconds, default 6), ``root-path`` (default ``/burrow``, created on every connect)
and ``tls`` (the name of a tls profile: ``cafile`` required, ``certfile``/``keyfile`` optional,
``noverify``). Burrow only needs ZooKeeper for the notifier lock at ``<root-path>/notifier``, so the
daemon starts this coordinator only when notifiers are configured.

Availability: a ZooKeeper that cannot be reached at start, or a session that expires later, never
stops the daemon. kazoo keeps reconnecting in the background; each change is logged once, with what
it means for notifications. A :class:`ZookeeperLock` counts as held only while the session that took
it is connected: on SUSPENDED (connection lost, session maybe alive) the holder pauses, because
another instance may take the lock as soon as the server expires the session; on LOST (session
expired) it lets the lock go and contends again once a new session is up, like Burrow.

kazoo runs its own threads. Its state callbacks are handed to the event loop with
``call_soon_threadsafe``; short ZooKeeper calls run in worker threads, and each lock's blocking
``acquire`` has a thread of its own so that waiting for a lock never occupies the shared pool.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import CancelledError as LockCancelled
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

from burrowpy.config import ConfigError, Section, valid_zookeeper_path

DEFAULT_ROOT_PATH = "/burrow"
LOCK_RETRY_DELAY = 1.0  # seconds before contending again after ZooKeeper refused a lock operation


def validate_root_path(section: Section, key: str, path: str) -> str:
    if not valid_zookeeper_path(path):
        raise section.error(key, f"{path!r} is not a ZooKeeper path such as /burrow "
                                 "(absolute, below the root, not in /zookeeper)")
    return path


def _kazoo_tls(section: Section, tls: Section | None) -> dict[str, Any]:
    name = section.get_str("tls", "")
    if not name:
        return {}
    if tls is None:
        raise section.error("tls", f"names the tls profile {name!r}, which is not defined")
    options: dict[str, Any] = {"use_ssl": True, "ca": tls.get_str("cafile"),
                               "verify_certs": not tls.get_bool("noverify", False)}
    certfile, keyfile = tls.get_str("certfile", ""), tls.get_str("keyfile", "")
    if certfile:
        options["certfile"] = certfile
    if keyfile:
        options["keyfile"] = keyfile
    return options


class ZookeeperCoordinator:
    """Owns the daemon's kazoo client (``.client``); tracks connection state; hands out locks."""

    KEYS = ("servers", "timeout", "root-path", "tls")

    def __init__(self, section: Section | None, ctx: Any, *, tls: Section | None = None) -> None:
        if section is None:
            raise ConfigError("configuration", "zookeeper.servers",
                              "is required because notifiers are configured (their lock lives in ZooKeeper)")
        section.check_keys(self.KEYS)
        self.servers = section.get_hostports("servers")
        if not self.servers:
            raise section.error("servers", "no ZooKeeper servers specified")
        self.timeout = section.get_float("timeout", 6.0)
        if self.timeout <= 0:
            raise section.error("timeout", "must be a positive number of seconds")
        self.root_path = validate_root_path(section, "root-path",
                                            section.get_str("root-path", DEFAULT_ROOT_PATH))
        self.logger = ctx.logger.bind(coordinator="zookeeper")
        self.client = KazooClient(
            hosts=",".join(self.servers),
            timeout=self.timeout,
            connection_retry=KazooRetry(max_tries=-1, max_delay=10.0),
            **_kazoo_tls(section, tls),
        )
        self.session_generation = 0  # bumped whenever a session is lost
        self._connected = asyncio.Event()
        self._session_over = asyncio.Event()  # set when the current generation's session ends
        self._listeners: list[Callable[[], None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._background: set[asyncio.Task] = set()

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.client.add_listener(self._kazoo_state)
        started = self.client.start_async()
        await asyncio.to_thread(started.wait, self.timeout)
        if not self.client.connected:
            self.logger.error("cannot reach ZooKeeper; notifications wait until it answers, retrying in the "
                              "background", servers=self.servers)

    async def stop(self) -> None:
        self.client.remove_listener(self._kazoo_state)
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await asyncio.to_thread(self.client.stop)
        await asyncio.to_thread(self.client.close)
        self._connected.clear()
        self._end_session()

    def lock(self, name: str) -> ZookeeperLock:
        """A lock at ``<root-path>/<name>``; ``start()`` it to contend."""
        return ZookeeperLock(self, f"{self.root_path}/{name}")

    def on_change(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the event loop) after every connection state change."""
        self._listeners.append(callback)

    async def wait_connected(self) -> None:
        await self._connected.wait()

    async def wait_session_end(self, generation: int) -> None:
        """Return once the session of ``generation`` is over (immediately if it already is)."""
        while self.session_generation == generation:
            await self._session_over.wait()

    def _kazoo_state(self, state: str) -> None:
        # Called on a kazoo thread: only hand the change over to the loop.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._state_changed, state)

    def _state_changed(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
            self.logger.info("connected to ZooKeeper", servers=self.servers)
            task = asyncio.create_task(self._ensure_root())
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        elif state == KazooState.SUSPENDED:
            self._connected.clear()
            self.logger.warning("lost the connection to ZooKeeper; locks are paused until it comes back or the "
                                "session expires", session_timeout=self.timeout)
        else:
            self._connected.clear()
            self._end_session()
            self.logger.error("ZooKeeper session expired; locks are released and will be contended for again "
                              "once a new session is up")
        for callback in list(self._listeners):
            callback()

    def _end_session(self) -> None:
        self.session_generation += 1
        self._session_over.set()
        self._session_over = asyncio.Event()

    async def _ensure_root(self) -> None:
        try:
            await asyncio.to_thread(self.client.ensure_path, self.root_path)
        except KazooException as exc:
            self.logger.warning("could not create the root path; will try again on the next connect",
                                root_path=self.root_path, error=repr(exc))


class ZookeeperLock:
    """kazoo's lock recipe at ``path``, held across the life of one session and retaken after it.

    ``held`` is true only while this instance owns the lock and its session is connected.
    """

    def __init__(self, zookeeper: ZookeeperCoordinator, path: str) -> None:
        self.zookeeper = zookeeper
        self.path = path
        self.identifier = f"{socket.gethostname()}:{os.getpid()}"
        self.logger = zookeeper.logger.bind(lock=path)
        self._holding = False
        self._held = asyncio.Event()
        self.generation = 0  # bumped each time this instance takes the lock
        self.node_path: str | None = None  # this instance's lock node while it holds the lock
        self._recipe: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task | None = None

    @property
    def held(self) -> bool:
        return self._held.is_set()

    async def wait_held(self) -> None:
        await self._held.wait()

    async def start(self) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"zk-lock{self.path}")
        self.zookeeper.on_change(self._update)
        self._task = asyncio.create_task(self._contend())

    async def stop(self) -> None:
        if self._recipe is not None:
            self._recipe.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._holding:
            await self._release(self._recipe)
            self._set_holding(False)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _contend(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.zookeeper.wait_connected()
            recipe = self.zookeeper.client.Lock(self.path, self.identifier)
            self._recipe = recipe
            try:
                await loop.run_in_executor(self._executor, recipe.acquire)
                generation = self.zookeeper.session_generation
                # The session may have ended between the acquire and now; then the node is gone.
                alive = await asyncio.to_thread(self.zookeeper.client.exists, f"{self.path}/{recipe.node}")
            except LockCancelled:
                return
            except KazooException as exc:
                self.logger.warning("could not take the ZooKeeper lock; trying again", error=repr(exc))
                await self._release(recipe)
                await asyncio.sleep(LOCK_RETRY_DELAY)
                continue
            if alive is None:
                await self._release(recipe)
                continue
            self.node_path = f"{self.path}/{recipe.node}"
            self.generation += 1
            self._set_holding(True)
            self.logger.info("took the ZooKeeper lock", identifier=self.identifier)
            await self.zookeeper.wait_session_end(generation)
            self._set_holding(False)
            self.node_path = None
            self.logger.warning("gave up the ZooKeeper lock: its session expired; contending again")
            await self._release(recipe)

    async def _release(self, recipe: Any) -> None:
        try:
            await asyncio.to_thread(recipe.release)
        except KazooException as exc:
            # The node goes away with its session anyway; a failed release only delays that.
            self.logger.info("could not delete the lock node; it goes away with its session", error=repr(exc))

    def _set_holding(self, holding: bool) -> None:
        self._holding = holding
        self._update()

    def _update(self) -> None:
        if self._holding and self.zookeeper.connected:
            self._held.set()
        else:
            self._held.clear()
