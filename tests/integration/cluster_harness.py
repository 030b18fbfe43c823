"""A cluster of `burrowpy broker` processes on 127.0.0.1 for tests and benchmarks: configs with short
Raft and gossip timings, start / kill -9 / restart of single brokers, and Metadata through our client."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness import BrokerProcess, free_port, wait_until

from broker.client import KafkaConnection
from broker.protocol.api import ApiKey

# A cluster secret as `python3 -c 'import secrets; print(secrets.token_hex(32))'` makes them (at least 32
# characters are required); fixed, so that a test may start brokers of one cluster at different times.
SECRET = "6f1d3c0a9b8e47f2a5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9012345"
# Short timings so that failover takes about a second: gossip declares a silent broker dead after ~0.5 s.
FAST_CLUSTER = {
    "raft": {"election_timeout_min_ms": 300, "election_timeout_max_ms": 600, "heartbeat_interval_ms": 50,
             "reconnect_interval_ms": 200},
    "gossip": {"protocol_period_ms": 100, "ping_timeout_ms": 40, "suspicion_multiplier": 3,
               "push_pull_interval_ms": 1000},
    "controller": {"preferred_leader_election_interval_ms": 1000, "unknown_broker_grace_ms": 3000},
}
BROKER_SETTINGS = {
    "num.partitions": 6,
    "default.replication.factor": 3,
    "offsets.topic.num.partitions": 6,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.num.partitions": 6,
    "transaction.state.log.replication.factor": 3,
    "group.initial.rebalance.delay.ms": 200,
    "replica.lag.time.max.ms": 3000,
    # a stop waits at most 5 s for its hand-over (Kafka 3's 3 x 5 s would hold every teardown of a cluster)
    "controlled.shutdown.max.retries": 5,
    "controlled.shutdown.retry.backoff.ms": 1000,
}


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _unsettled(partition: dict[str, Any]) -> bool:
    """A partition of a Metadata answer without a leader, or with a replica out of its ISR."""
    return partition["leader_id"] < 0 or sorted(partition["isr_nodes"]) != sorted(partition["replica_nodes"])


class BrokerCluster:
    def __init__(self, root: Path, size: int = 3, settings: dict[str, Any] | None = None,
                 timings: dict[str, dict[str, Any]] | None = None,
                 node_settings: Callable[[int, int], dict[str, Any]] | None = None,
                 args: tuple[str, ...] = ()) -> None:
        """``timings``: the raft / gossip / controller timing keys (default: the short ones for tests; ``{}``
        for the brokers' own defaults). ``node_settings(node_id, port)``: settings of one node (its
        ``listeners``, with a PLAINTEXT one on ``port`` for the harness); ``args``: more command-line
        arguments for every node."""
        self._timings = FAST_CLUSTER if timings is None else timings
        self._settings = settings or {}
        self._node_settings = node_settings
        self._args = args
        self.root = root
        self.ids = list(range(1, size + 1))
        raft = {i: f"127.0.0.1:{free_port()}" for i in self.ids}
        self.raft_addresses = raft
        self.gossip_addresses = {i: f"127.0.0.1:{free_udp_port()}" for i in self.ids}
        self.brokers: dict[int, BrokerProcess] = {}
        for i in self.ids:
            self.brokers[i] = self._broker(i, {j: raft[j] for j in self.ids if j != i})

    def _broker(self, node_id: int, peers: dict[int, str], join: bool = False) -> BrokerProcess:
        timings = self._timings
        cluster = {
            "secret": SECRET,
            "raft": {"listen": self.raft_addresses[node_id], "peers": peers, **({"join": True} if join else {}),
                     **timings.get("raft", {})},
            "gossip": {"listen": self.gossip_addresses[node_id],
                       "seeds": [address for j, address in self.gossip_addresses.items() if j != node_id],
                       **timings.get("gossip", {})},
            "controller": timings.get("controller", {}),
        }
        port = free_port()
        node_settings = self._node_settings(node_id, port) if self._node_settings else {}
        config = {**BROKER_SETTINGS, **self._settings, **node_settings, "cluster": cluster}
        (self.root / f"broker-{node_id}").mkdir(parents=True, exist_ok=True)
        return BrokerProcess(self.root / f"broker-{node_id}" / "data", port=port, node_id=node_id,
                             extra_config=config, args=self._args)

    def add_broker(self, node_id: int, voters: list[int], raft_address: str | None = None) -> BrokerProcess:
        """A new broker joining the running cluster (``raft.join``, the ``voters`` as its Raft peers, every broker
        so far as its gossip seeds), started; it is not a voter until one is added for it, and accepts clients only
        once it is one and has caught up."""
        self.raft_addresses[node_id] = raft_address or f"127.0.0.1:{free_port()}"
        self.gossip_addresses[node_id] = f"127.0.0.1:{free_udp_port()}"
        broker = self._broker(node_id, {j: self.raft_addresses[j] for j in voters}, join=True)
        self.brokers[node_id] = broker
        self.ids.append(node_id)
        broker.launch()
        broker.wait_logged("accepting clients once a voter is added", 90)  # while the cluster is under load
        return broker

    @property
    def bootstrap(self) -> str:
        return ",".join(self.brokers[i].bootstrap for i in self.running())

    def running(self) -> list[int]:
        return [i for i in self.ids if self.brokers[i].proc is not None]

    def start(self) -> BrokerCluster:
        for i in self.ids:
            self.brokers[i].launch()
        for i in self.ids:
            self.brokers[i].wait_ready()
        self.wait_healthy()
        return self

    def stop(self) -> None:
        for i in self.ids:
            self.brokers[i].terminate()
        for i in self.ids:
            self.brokers[i].stop()

    def kill(self, node_id: int) -> None:
        self.brokers[node_id].kill()

    def restart(self, node_id: int) -> None:
        self.brokers[node_id].start()

    def pause(self, node_id: int) -> None:
        """SIGSTOP: the process stays, silent, as a machine that stalls (GC, swapping, a hung disk)."""
        proc = self.brokers[node_id].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        proc = self.brokers[node_id].proc
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)

    @contextlib.contextmanager
    def paused(self, node_id: int) -> Iterator[None]:
        self.pause(node_id)
        try:
            yield
        finally:
            self.resume(node_id)

    # --- what the brokers say --------------------------------------------------------------------------------

    def metadata(self, node_id: int, topics: list[str] | None = None) -> dict[str, Any]:
        async def ask() -> dict[str, Any]:
            connection = await KafkaConnection.connect(self.brokers[node_id].bootstrap, timeout=5)
            async with connection:
                wanted = None if topics is None else [{"name": t, "topic_id": bytes(16)} for t in topics]
                return await connection.request(ApiKey.METADATA, {"topics": wanted,
                                                                  "allow_auto_topic_creation": False})
        return asyncio.run(ask())

    def create_topic(self, node_id: int, name: str, partitions: int, replication: int,
                     configs: dict[str, str] | None = None) -> dict[str, Any]:
        """CreateTopics sent to this very broker (real clients send it to the controller)."""
        async def ask() -> dict[str, Any]:
            connection = await KafkaConnection.connect(self.brokers[node_id].bootstrap, timeout=30)
            async with connection:
                answer = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{
                    "name": name, "num_partitions": partitions, "replication_factor": replication,
                    "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
                    "timeout_ms": 30000})
                return answer["topics"][0]
        return asyncio.run(ask())

    def delete_topic(self, node_id: int, name: str) -> dict[str, Any]:
        """DeleteTopics sent to this very broker (real clients send it to the controller)."""
        async def ask() -> dict[str, Any]:
            connection = await KafkaConnection.connect(self.brokers[node_id].bootstrap, timeout=30)
            async with connection:
                answer = await connection.request(ApiKey.DELETE_TOPICS, {
                    "topic_names": [name], "timeout_ms": 30000}, version=5)
                return answer["responses"][0]
        return asyncio.run(ask())

    def controller(self, node_id: int | None = None) -> int:
        return self.metadata(node_id or self.running()[0])["controller_id"]

    def partitions(self, topic: str, node_id: int | None = None) -> dict[int, dict[str, Any]]:
        answer = self.metadata(node_id or self.running()[0], [topic])
        found = answer["topics"][0]
        assert found["error_code"] == 0, found
        return {p["partition_index"]: p for p in found["partitions"]}

    def healthy(self) -> bool:
        """Every running broker agrees on the controller and the live brokers, and every partition of every
        topic is led and fully in sync (all replicas of the running brokers in the ISR)."""
        running = self.running()
        views = [self.metadata(i) for i in running]
        controllers = {v["controller_id"] for v in views}
        if len(controllers) != 1 or controllers.pop() not in running:
            return False
        for view in views:
            if sorted(b["node_id"] for b in view["brokers"]) != running:
                return False
            if not any(t["name"] == "__consumer_offsets" for t in view["topics"]):
                return False
            if any(_unsettled(part) for topic in view["topics"] for part in topic["partitions"]):
                return False
        return True

    def wait_healthy(self, timeout: float = 40.0) -> None:
        try:
            wait_until(self.healthy, timeout, interval=0.2, message="the cluster to be healthy")
        except AssertionError as exc:
            # The brokers' logs live in the test's temporary directory, gone by the time a CI run is read: what
            # each broker says of the cluster, and the end of its log, go into the failure itself.
            raise AssertionError(f"{exc}\n{self.describe()}") from None

    def describe(self) -> str:
        """Each running broker's view (controller, live brokers, partitions not led or not in sync) and the last
        warnings, Raft lines and lines not of the logger (a traceback) of its log: what a failed wait for health
        shows."""
        lines = []
        for i in self.running():
            try:
                view = self.metadata(i)
                lagging = sum(1 for topic in view["topics"] for part in topic["partitions"] if _unsettled(part))
                lines.append(f"broker {i}: controller {view['controller_id']}, brokers "
                             f"{sorted(b['node_id'] for b in view['brokers'])}, {lagging} partitions not led or "
                             "not in sync")
            except Exception as exc:  # a broker that does not answer is what the failure is about
                lines.append(f"broker {i}: no metadata ({exc!r})")
            try:
                tail = self.brokers[i].log_path.read_text(errors="replace")[-200_000:].splitlines()[1:]
            except OSError:
                tail = []
            noted = [line for line in tail
                     if not line.startswith("{") or "raft" in line
                     or any(f'"level": "{level}"' in line for level in ("warning", "error", "critical"))]
            lines += [f"  {line[:300]}" for line in noted[-15:]]
        return "\n".join(lines)
