"""Brokers whose cluster view is set by hand, to test replication without the metadata quorum.

``StaticClusterBroker`` is a real Broker (real server, logs, handlers) with fixed peers and leadership
assigned by commands: ``lead`` and ``follow`` record the assignment that Metadata, Produce and Fetch read
through its cluster view (``StaticView``) and hand the role to the ReplicaManager, as the cluster layer will. Its
``append`` is the one the cluster layer needs (the replica manager owns the high watermark), and its view's
``propose_isr`` commits at once, as a controller that agrees with the leader.

Run as a script it is one broker process driven by JSON commands, one per line on stdin, each answered by
one JSON line on stdout (logs go to stderr). ``ReplicationNode`` runs and drives such a process.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from broker.broker import Broker  # noqa: E402
from broker.cluster.keys import derive_key  # noqa: E402
from broker.cluster.replication import ReplicaManager  # noqa: E402
from broker.cluster.view import SingleNodeView, replica_leader_epoch  # noqa: E402
from broker.config import BrokerConfig  # noqa: E402
from broker.log.background import wait_durable  # noqa: E402
from broker.protocol.records import decode_records_any  # noqa: E402

SECRET = "replication test secret"  # the static cluster's: its brokers prove themselves to each other with it
BROKER_EPOCH = 0


@dataclass
class Assignment:
    leader: int
    epoch: int
    replicas: list[int]
    isr: list[int] = field(default_factory=list)


class StaticView(SingleNodeView):
    """A static cluster as one of its brokers sees it: fixed peers, each registered at one epoch that never
    changes, leadership as assigned by ``lead`` and ``follow`` (a partition not assigned is this broker's),
    and ISR changes committed at once, as by a controller that agrees with the leader."""

    def __init__(self, broker: StaticClusterBroker) -> None:
        super().__init__(broker.node_id, lambda: None, broker.endpoints, lambda: (broker.host, broker.port),
                         lambda topic: None)
        self.broker = broker

    def live_brokers(self, listener: str | None = None) -> list[tuple[int, str, int, str | None]]:
        return [(node_id, "127.0.0.1", port, None) for node_id, port in sorted(self.broker.peers.items())]

    def broker_epoch(self, node_id: int) -> int | None:
        return BROKER_EPOCH if node_id in self.broker.peers else None

    def partition_leader(self, topic: str, partition: int) -> tuple[int, int, list[int], list[int]]:
        assignment = self.broker.assignments.get((topic, partition))
        if assignment is None:
            return super().partition_leader(topic, partition)
        return assignment.leader, assignment.epoch, list(assignment.replicas), list(assignment.isr)

    def leader_epoch(self, topic: str, partition: int) -> int:
        return replica_leader_epoch(self, self.node_id, self.broker.replica_manager, topic, partition)

    async def propose_isr(self, topic: str, partition: int, isr: list[int], leader_epoch: int) -> bool:
        assignment = self.broker.assignments.get((topic, partition))
        if assignment is None or assignment.leader != self.node_id or assignment.epoch != leader_epoch:
            return False
        assignment.isr = list(isr)
        return True


class StaticClusterBroker(Broker):
    def __init__(self, config: BrokerConfig, peers: dict[int, int]) -> None:
        super().__init__(config)
        self.peers = peers  # node id -> port on 127.0.0.1
        self.assignments: dict[tuple[str, int], Assignment] = {}
        self.replica_manager = ReplicaManager(self)
        self.inter_broker_key = derive_key(SECRET, "inter-broker")
        self.cluster_view = StaticView(self)

    async def start(self) -> None:
        await super().start()
        await self.replica_manager.start()

    async def stop(self) -> None:
        await self.replica_manager.stop()
        await super().stop()

    async def append(self, topic: str, partition: int, batch: bytes | memoryview, *, leader_epoch: int = 0):
        plog = self.partition_log(topic, partition)
        result = plog.append(batch, leader_epoch=leader_epoch, now_ms=int(self.clock() * 1000))
        if not result.duplicate:
            self.replica_manager.on_leader_append(topic, partition)
            self.notify_appended(topic, partition)
        return result

    def lead(self, topic: str, partition: int, epoch: int, replicas: list[int], isr: list[int]) -> None:
        self.assignments[(topic, partition)] = Assignment(self.node_id, epoch, replicas, isr)
        self.replica_manager.become_leader(topic, partition, epoch, replicas, isr)

    def follow(self, topic: str, partition: int, epoch: int, leader: int, replicas: list[int]) -> None:
        self.assignments[(topic, partition)] = Assignment(leader, epoch, replicas)
        self.replica_manager.become_follower(topic, partition, epoch, leader)

    def describe(self, topic: str, partition: int) -> dict[str, Any]:
        plog = self.partition_log(topic, partition)
        data = plog.read(plog.log_start_offset, 1 << 30) if plog.log_end_offset > plog.log_start_offset else b""
        state = self.replica_manager.leader_state(topic, partition)
        return {
            "log_end_offset": plog.log_end_offset,
            "high_watermark": plog.high_watermark,
            "log_start_offset": plog.log_start_offset,
            "segments": plog.segment_count,
            "epochs": plog.leader_epoch_entries(),
            "isr": None if state is None else list(state.isr),
            "following": self.replica_manager.following(topic, partition),
            "digest": hashlib.sha256(data).hexdigest(),
            "values": [record.value.decode() for record in decode_records_any(data) if record.value],
        }


@contextlib.asynccontextmanager
async def static_pair(root: Path, overrides: dict[str, Any]) -> AsyncIterator[list[StaticClusterBroker]]:
    """Brokers 1 and 2 in this event loop, each knowing the other, with the broker configs ``overrides``;
    stopped on the way out, also when one fails to start."""
    from harness import free_port

    ports = {1: free_port(), 2: free_port()}
    brokers: list[StaticClusterBroker] = []
    try:
        for node_id, port in ports.items():
            config = BrokerConfig.load(None, listen=f"127.0.0.1:{port}", data_dir=str(root / f"n{node_id}"),
                                       node_id=node_id, overrides=overrides)
            broker = StaticClusterBroker(config, ports)
            brokers.append(broker)
            await broker.start()
        yield brokers
    finally:
        for broker in brokers:
            await broker.stop()


async def _serve_commands(broker: StaticClusterBroker) -> None:
    print(json.dumps({"ready": True, "port": broker.port}), flush=True)
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            return
        command = json.loads(line)
        op = command.pop("op")
        try:
            if op == "create_topic":
                topic = broker.create_topic(command["topic"], command.get("partitions", 1), command.get("configs", {}))
                # as a broker's CreateTopics answers: once the topic's file is durable (it is written off the
                # event loop), so that a node killed right after finds the topic at its restart
                await wait_durable(topic.saved, f"topic {command['topic']}")
                answer: dict[str, Any] = {}
            elif op == "lead":
                broker.lead(**command)
                answer = {}
            elif op == "follow":
                broker.follow(**command)
                answer = {}
            elif op == "stop_replica":
                broker.replica_manager.stop_replica(**command)
                answer = {}
            elif op == "describe":
                answer = broker.describe(**command)
            else:
                raise ValueError(f"unknown op {op!r}")
            answer["ok"] = True
        except Exception as exc:
            answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


async def _run_node(node_id: int, port: int, data_dir: str, peers: dict[int, int], config_path: str | None) -> None:
    config = BrokerConfig.load(config_path, listen=f"127.0.0.1:{port}", data_dir=data_dir, node_id=node_id)
    broker = StaticClusterBroker(config, peers)
    await broker.start()
    try:
        await _serve_commands(broker)
    finally:
        await broker.stop()


def _configure_logging() -> None:
    import logging

    import structlog

    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"),
                    structlog.processors.format_exc_info, structlog.processors.JSONRenderer()],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


class ReplicationNode:
    """One StaticClusterBroker process; ``command`` sends a JSON command and returns the answer."""

    def __init__(self, node_id: int, port: int, data_dir: Path, peers: dict[int, int],
                 config: dict[str, Any] | None = None) -> None:
        self.node_id = node_id
        self.port = port
        self.data_dir = Path(data_dir)
        self.peers = peers
        self.config = config or {}
        self.log_path = self.data_dir.parent / f"node-{node_id}.log"
        self.proc: subprocess.Popen | None = None
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ReplicationNode:
        self.launch()
        return self.wait_ready(timeout)

    def launch(self) -> None:
        """Start the process without waiting for it: several nodes boot side by side."""
        import yaml

        config_path = self.data_dir.parent / f"node-{self.node_id}.yaml"
        config_path.write_text(yaml.safe_dump(self.config))
        log = open(self.log_path, "ab")  # noqa: SIM115 (closed once the child has it)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(self.node_id), str(self.port), str(self.data_dir),
             json.dumps(self.peers), str(config_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        self._answers = queue.Queue()
        threading.Thread(target=self._read_answers, args=(self.proc, self._answers), daemon=True).start()

    def wait_ready(self, timeout: float = 60.0) -> ReplicationNode:
        ready = self._next_answer(timeout)
        if not ready.get("ready"):
            raise AssertionError(f"node {self.node_id} did not start: {ready}\n{self.log_text()}")
        return self

    @staticmethod
    def _read_answers(proc: subprocess.Popen, answers: queue.Queue) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            answers.put(json.loads(line))
        answers.put(None)

    def _next_answer(self, timeout: float) -> dict[str, Any]:
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"node {self.node_id} did not answer within {timeout}s\n{self.log_text()}") from None
        if answer is None:
            raise AssertionError(f"node {self.node_id} exited\n{self.log_text()}")
        return answer

    def command(self, op: str, timeout: float = 30.0, **arguments: Any) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.proc.stdin.flush()
        answer = self._next_answer(timeout)
        if not answer.pop("ok"):
            raise AssertionError(f"node {self.node_id}: {op} failed: {answer['error']}")
        return answer

    def describe(self, topic: str, partition: int = 0) -> dict[str, Any]:
        return self.command("describe", topic=topic, partition=partition)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """kill -9: no chance to flush or close anything."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def end_commands(self) -> None:
        """The end of commands: the node stops its broker and exits (``stop`` waits for it)."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is None:
            return
        self.end_commands()
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


if __name__ == "__main__":
    _configure_logging()
    node, listen_port, directory, peers_json = sys.argv[1:5]
    asyncio.run(_run_node(int(node), int(listen_port), directory,
                          {int(k): v for k, v in json.loads(peers_json).items()},
                          sys.argv[5] if len(sys.argv) > 5 else None))
