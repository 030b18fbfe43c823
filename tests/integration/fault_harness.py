"""Fault injection for a three-broker cluster of real `burrowpy broker` processes, driven from the test.

* :class:`FaultCluster`: a :class:`BrokerCluster` whose brokers reach each other only through relays of
  ours, so that one broker can be cut off from the others while clients still reach it:
  - Raft: one TCP relay per pair of brokers. pysyncobj opens one connection per pair, from the node
    with the greater address, and the other side knows the caller by the address it announces; so the
    caller is given the relay as the other's address, and the relay's ports are chosen below every Raft
    port (pysyncobj compares addresses as strings: all are 127.0.0.1 with five-digit ports).
  - replication: the inter-broker listener (``BROKER``) is advertised at a :class:`KafkaRelay` in front
    of it; clients use the ``PLAINTEXT`` listener directly. The relay can refuse one broker's replica
    fetcher by the client id on its requests.
  - gossip: each broker advertises a :class:`UdpRelay` in front of its UDP socket (``gossip.advertise``),
    which can drop everything to the broker, or what one broker sends.
* :class:`AckedWorkload`: an idempotent ``acks=all`` producer (confluent-kafka) in a thread that records
  every acknowledgement, and :func:`check_acknowledged` / :func:`check_replicas_identical`, the checks
  after a scenario.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
import selectors
import shutil
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_harness import FAST_CLUSTER, BrokerCluster, free_udp_port
from harness import Scrape, free_port, wait_until
from tcp_proxy import TcpRelay

from broker.client import ClientError, KafkaConnection
from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.protocol.api import ApiKey
from broker.protocol.records import Record, build_batch, decode_records_any, iter_batches

FETCHER_CLIENT_ID = "replica-fetcher-{}"  # what a broker's replica fetcher calls itself (broker/cluster/replication.py)
TXN_MARKER_CLIENT_ID = "broker-{}-txn-marker-sender"  # its transaction markers' connections (broker/txn/coordinator.py)


# --- relays ----------------------------------------------------------------------------------------------------

def kafka_client_id(first_bytes: bytes) -> str | None:
    """The client id in the header of the first Kafka request on a connection (request header v1 and v2
    both start: size, api key, api version, correlation id, client id as a nullable INT16 string)."""
    if len(first_bytes) < 14:
        return None
    (length,) = struct.unpack_from(">h", first_bytes, 12)
    if length < 0 or len(first_bytes) < 14 + length:
        return None
    return first_bytes[14:14 + length].decode("utf-8", "replace")


class KafkaRelay(TcpRelay):
    """A :class:`TcpRelay` in front of a Kafka listener that can also refuse the connections of one client id
    (read from the first request each connection sends) while relaying everyone else's."""

    def __init__(self, target_host: str, target_port: int) -> None:
        super().__init__(target_host, target_port)
        self._client_ids: dict[socket.socket, str | None] = {}
        self._refused: set[str] = set()
        self._lock = threading.Lock()

    def refuse(self, client_id: str) -> None:
        self._note(f"refusing {client_id}")
        with self._lock:
            self._refused.add(client_id)

    def allow_all(self) -> None:
        self._note("allowing every client")
        with self._lock:
            self._refused.clear()

    def _is_refused(self, client_id: str | None) -> bool:
        with self._lock:
            return client_id is not None and client_id in self._refused

    def _step(self) -> None:
        for sock, client_id in list(self._client_ids.items()):
            if sock not in self._pairs:
                del self._client_ids[sock]
            elif self._is_refused(client_id):
                self._note(f"closed a connection of {client_id}")
                self._close(sock)
        super()._step()

    def _relay(self, sock: socket.socket) -> None:
        if sock in self._clients and sock not in self._client_ids:
            try:
                first = sock.recv(256, socket.MSG_PEEK)
            except BlockingIOError:
                return
            except OSError:
                first = b""
            client_id = kafka_client_id(first)
            self._client_ids[sock] = client_id
            if self._is_refused(client_id):
                self._note(f"refused a connection of {client_id}")
                self._close(sock)
                return
        super()._relay(sock)


class UdpRelay:
    """Datagrams sent to :attr:`address` go on to ``target``, each sender's through a socket of its own so
    that the target's answers (sent back to where a datagram came from) find their sender. ``cut`` drops
    everything both ways; ``drop_from`` drops what one sender (by its address) sends."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.port = free_udp_port()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.setblocking(False)
        self._upstream: dict[tuple[str, int], socket.socket] = {}  # sender -> socket towards the target
        self._senders: dict[socket.socket, tuple[str, int]] = {}
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._cut = threading.Event()
        self._dropped: set[tuple[str, int]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"udp-relay-{self.port}", daemon=True)
        self.errors: list[BaseException] = []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> UdpRelay:
        self._thread.start()
        return self

    def cut(self) -> None:
        self._cut.set()

    def drop_from(self, sender: tuple[str, int]) -> None:
        with self._lock:
            self._dropped.add(sender)

    def restore(self) -> None:
        with self._lock:
            self._dropped.clear()
        self._cut.clear()

    def _passes(self, sender: tuple[str, int]) -> bool:
        with self._lock:
            return not self._cut.is_set() and sender not in self._dropped

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in [self._listener, *self._senders]:
            sock.close()
        self._selector.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for key, _ in self._selector.select(0.05):
                    self._forward(key.fileobj)
            except Exception as exc:  # noqa: BLE001 (kept for the test to report)
                self.errors.append(exc)

    def _forward(self, sock: socket.socket) -> None:
        try:
            data, sender = sock.recvfrom(65536)
        except (BlockingIOError, ConnectionRefusedError):  # the target was down when something went to it
            return
        if sock is self._listener:
            if not self._passes(sender):
                return
            upstream = self._upstream.get(sender)
            if upstream is None:
                upstream = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                upstream.bind(("127.0.0.1", 0))
                upstream.setblocking(False)
                self._upstream[sender] = upstream
                self._senders[upstream] = sender
                self._selector.register(upstream, selectors.EVENT_READ)
            with contextlib.suppress(OSError):
                upstream.sendto(data, self.target)
        elif not self._cut.is_set():
            with contextlib.suppress(OSError):
                self._listener.sendto(data, self._senders[sock])


# --- the cluster ---------------------------------------------------------------------------------------------

# Gossip through the relays (threads of the test process, on a busy machine) is slower than direct: with
# cluster_harness's 40 ms ping timeout live brokers were declared dead and leadership flapped.
RELAYED_TIMINGS = {**FAST_CLUSTER, "gossip": {**FAST_CLUSTER["gossip"], "protocol_period_ms": 200,
                                               "ping_timeout_ms": 100, "suspicion_multiplier": 4}}


def _five_digit_ports(count: int) -> list[int]:
    ports = sorted(free_port() for _ in range(count))
    # pysyncobj compares "host:port" strings; with five digits everywhere that is the ports' order
    assert all(10000 <= p <= 65535 for p in ports), ports
    return ports


class FaultCluster(BrokerCluster):
    def __init__(self, root: Path, settings: dict[str, Any] | None = None) -> None:
        broker_ports = {i: free_port() for i in (1, 2, 3)}
        self.kafka_relays = {i: KafkaRelay("127.0.0.1", port) for i, port in broker_ports.items()}
        self.metrics_ports = {i: free_port() for i in (1, 2, 3)}

        def listeners(node_id: int, port: int) -> dict[str, Any]:
            relay = self.kafka_relays[node_id]
            return {"listeners": f"PLAINTEXT://127.0.0.1:{port},BROKER://127.0.0.1:{broker_ports[node_id]}",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},BROKER://127.0.0.1:{relay.port}",
                    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT",
                    "inter.broker.listener.name": "BROKER",
                    "metrics.listen": f"127.0.0.1:{self.metrics_ports[node_id]}"}

        # the id a cluster derives when given none comes from the Raft addresses, which differ per broker here
        settings = {"cluster.id": f"faults-{uuid.uuid4().hex[:12]}", **(settings or {})}
        super().__init__(root, settings=settings, node_settings=listeners, timings=RELAYED_TIMINGS)
        ports = _five_digit_ports(6)
        relay_ports, raft_ports = ports[:3], ports[3:]
        raft = {i: f"127.0.0.1:{raft_ports[i - 1]}" for i in self.ids}
        self.raft_addresses = raft
        self.raft_relays: dict[frozenset[int], TcpRelay] = {}
        peers: dict[int, dict[int, str]] = {i: {} for i in self.ids}
        for a in self.ids:
            for b in self.ids:
                if a >= b:
                    continue
                caller, callee = (b, a) if raft_ports[b - 1] > raft_ports[a - 1] else (a, b)
                relay = TcpRelay("127.0.0.1", raft_ports[callee - 1], port=relay_ports.pop())
                self.raft_relays[frozenset((a, b))] = relay
                peers[caller][callee] = relay.address
                peers[callee][caller] = raft[caller]
        self.gossip_relays: dict[int, UdpRelay] = {}
        self.gossip_binds: dict[int, tuple[str, int]] = {}
        for i in self.ids:
            gossip = self.brokers[i].extra_config["cluster"]["gossip"]
            host, _, port = gossip["listen"].rpartition(":")
            self.gossip_binds[i] = (host, int(port))
            self.gossip_relays[i] = UdpRelay(self.gossip_binds[i])
        for i in self.ids:
            cluster = self.brokers[i].extra_config["cluster"]
            cluster["raft"] = {**cluster["raft"], "listen": raft[i], "peers": peers[i]}
            cluster["gossip"] = {**cluster["gossip"], "advertise": self.gossip_relays[i].address,
                                 "seeds": [self.gossip_relays[j].address for j in self.ids if j != i]}

    def _relays(self) -> list[Any]:
        return [*self.kafka_relays.values(), *self.raft_relays.values(), *self.gossip_relays.values()]

    def start(self) -> FaultCluster:
        for relay in self._relays():
            relay.start()
        super().start()
        return self

    def stop(self) -> None:
        for i in self.ids:
            self.resume(i)
        super().stop()
        for relay in self._relays():
            relay.stop()

    # --- faults --------------------------------------------------------------------------------------------

    def isolate(self, node_id: int) -> None:
        """Cut ``node_id`` off from the other brokers (Raft, replication and transaction markers both ways,
        gossip both ways); its clients' listener stays reachable."""
        for pair, relay in self.raft_relays.items():
            if node_id in pair:
                relay.cut()
        self.kafka_relays[node_id].cut()
        self.gossip_relays[node_id].cut()
        for other in self.ids:
            if other != node_id:
                self.kafka_relays[other].refuse(FETCHER_CLIENT_ID.format(node_id))
                self.kafka_relays[other].refuse(TXN_MARKER_CLIENT_ID.format(node_id))
                self.gossip_relays[other].drop_from(self.gossip_binds[node_id])

    def heal(self) -> None:
        for relay in self.raft_relays.values():
            relay.restore()
        for relay in self.kafka_relays.values():
            relay.restore()
            relay.allow_all()
        for relay in self.gossip_relays.values():
            relay.restore()

    # --- what the brokers say ------------------------------------------------------------------------------

    def leader_of(self, topic: str, partition: int = 0) -> int:
        def led() -> int:
            found = self.partitions(topic)[partition]
            return found["leader_id"] if found["leader_id"] in self.running() else 0
        return wait_until(led, 30, interval=0.1, message=f"a live leader of {topic}-{partition}")

    def isr(self, topic: str, partition: int = 0, node_id: int | None = None) -> list[int]:
        return sorted(self.partitions(topic, node_id)[partition]["isr_nodes"])

    def scrape(self, node_id: int) -> Scrape:
        """The broker's metrics (its metrics.listen)."""
        return Scrape(self.metrics_ports[node_id])


# --- the workload ----------------------------------------------------------------------------------------------

@dataclass
class Ack:
    partition: int
    offset: int | None  # None: acknowledged implicitly by librdkafka (see check_acknowledged)
    value: bytes
    at: float  # time.monotonic() of the acknowledgement


@dataclass
class AckedWorkload:
    """An idempotent ``acks=all`` producer writing ``<partition>:<n>`` (n counting up per partition) to every
    partition of ``topic`` in turn, about ``rate`` records a second, in a thread of its own."""

    bootstrap: str
    topic: str
    partitions: int
    rate: float = 200.0
    acks: list[Ack] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    error_codes: list[int] = field(default_factory=list)  # of failed deliveries and errors reported, in order
    sent: int = 0
    fatal: bool = False

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"workload-{self.topic}", daemon=True)
        self._failure: BaseException | None = None

    def start(self) -> AckedWorkload:
        self._thread.start()
        return self

    def acks_after(self, moment: float) -> int:
        return sum(1 for ack in list(self.acks) if ack.at > moment)

    def wait_for_acks(self, count: int, after: float = 0.0, timeout: float = 30.0) -> None:
        wait_until(lambda: self.acks_after(after) >= count, timeout, interval=0.05,
                   message=f"{count} acknowledgements of {self.topic} (errors: {self.errors[-3:]})")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)
        assert not self._thread.is_alive(), "the producer did not finish"
        if self._failure is not None:
            raise self._failure

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acks.append(Ack(message.partition(), message.offset(), message.value(), time.monotonic()))
        else:
            self.errors.append(str(error))
            self.error_codes.append(error.code())

    def _on_error(self, error: Any) -> None:
        self.error_codes.append(error.code())
        if error.fatal():  # the idempotent producer gave up: it acknowledges nothing more
            self.fatal = True
            self.errors.append(f"fatal: {error}")

    def _run(self) -> None:
        from confluent_kafka import Producer

        try:
            producer = Producer({
                "bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 5000,
                "retry.backoff.ms": 100, "retry.backoff.max.ms": 500, "topic.metadata.refresh.interval.ms": 1000,
                "reconnect.backoff.max.ms": 500, "socket.timeout.ms": 3000, "error_cb": self._on_error})
            counters = [0] * self.partitions
            interval = self.partitions / self.rate
            while not self._stop.is_set():
                try:
                    producer.poll(0)
                    if self.fatal:
                        return  # what it acknowledged is still checked
                    for partition in range(self.partitions):
                        value = f"{partition}:{counters[partition]}".encode()
                        producer.produce(self.topic, value, partition=partition, on_delivery=self._delivered)
                        counters[partition] += 1
                        self.sent += 1
                except Exception as exc:
                    if not _fatal(exc):
                        raise
                    self.errors.append(f"fatal: {exc}")
                    return  # confluent-kafka raises a fatal error, or a SystemError caused by it
                self._stop.wait(interval)
            left = producer.flush(75)
            if left:
                self.errors.append(f"{left} records neither acknowledged nor failed after 75 s")
        except BaseException as exc:  # noqa: BLE001 (raised again by stop())
            self._failure = exc


def _fatal(exc: BaseException | None) -> bool:
    from confluent_kafka import KafkaError, KafkaException

    while exc is not None:
        if isinstance(exc, KafkaException) and (exc.args[0].fatal() or exc.args[0].code() == KafkaError._FATAL):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


# --- the checks ------------------------------------------------------------------------------------------------

def read_topic(bootstrap: str, topic: str, partitions: int, timeout: float = 60.0) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of the topic up to each partition's high watermark, read by a real consumer:
    partition -> [(offset, value)]."""
    import confluent_kafka
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"checker-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "enable.partition.eof": True})
    try:
        ends = {p: high_watermark(consumer, TopicPartition(topic, p)) for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
        records: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(ends[p] and (not records[p] or records[p][-1][0] < ends[p] - 1) for p in ends):
            assert time.monotonic() < deadline, f"could not read {topic} up to {ends} in {timeout} s"
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue
            records[message.partition()].append((message.offset(), message.value()))
    finally:
        consumer.close()
    return records


def high_watermark(consumer: Any, partition: Any, timeout: float = 30.0) -> int:
    """The partition's high watermark, asked again after an error: just after the cluster is healthy again
    the preferred leader may be taking its leadership back, and a client whose metadata still names the
    previous leader is told NOT_LEADER_OR_FOLLOWER."""
    return wait_until(lambda: (consumer.get_watermark_offsets(partition, timeout=5)[1],), timeout, interval=0.2,
                      message=f"the high watermark of {partition.topic}-{partition.partition}")[0]


def check_acknowledged(workload: AckedWorkload, records: dict[int, list[tuple[int, bytes]]],
                       epochs: dict[int, dict[int, int]]) -> None:
    """Every acknowledged record is in the log at the offset it was acknowledged with, no record is there
    twice within one producer epoch, and each partition's records are in the order they were produced.

    ``epochs``: partition -> offset -> the producer epoch of its batch (:func:`check_replicas_identical`). A
    record may come back in a later epoch: librdkafka answers OUT_OF_ORDER_SEQUENCE_NUMBER on a request that
    was not the first in flight (normal after the first failed at a leader change) by bumping the epoch and
    sending again batches that may have been stored (confluentinc/librdkafka#4953, against Apache Kafka too;
    the Java client re-enqueues without a bump). Kafka dedupes retries of a producer id and epoch only, so
    that is as far as its guarantee, and this check, go."""
    for partition, found in records.items():
        first_epoch: dict[bytes, int] = {}
        for offset, value in found:
            epoch = epochs[partition][offset]
            if value in first_epoch:
                assert epoch > first_epoch[value], (
                    f"partition {partition} holds record {value!r} twice in producer epoch {epoch}")
            else:
                first_epoch[value] = epoch
        numbers = [int(value.split(b":")[1]) for value in first_epoch]
        assert numbers == sorted(numbers), f"partition {partition} is out of order: {numbers}"
    lost = []
    for ack in workload.acks:
        at = dict(records[ack.partition])
        if ack.offset is None:
            # librdkafka's implicit acknowledgement: a message awaiting its retry is reported delivered, with no
            # offset, once a later message of the same producer id and epoch is acknowledged (the broker keeps a
            # producer's sequence in order, so the earlier one is stored): it must be in the log all the same
            if ack.value not in at.values():
                lost.append((ack.partition, ack.offset, ack.value, None))
        elif at.get(ack.offset) != ack.value:
            lost.append((ack.partition, ack.offset, ack.value, at.get(ack.offset)))
    assert not lost, (f"{len(lost)} of {len(workload.acks)} acknowledged records lost, first: {lost[:5]}; "
                      f"seen along the way: {workload.errors[-3:]}")


def producer_epochs(data: bytes) -> dict[int, int]:
    """Offset -> the producer epoch of the batch holding it, for every offset of the batches in ``data``."""
    return {offset: header.producer_epoch for _pos, header in iter_batches(data)
            for offset in range(header.base_offset, header.base_offset + header.last_offset_delta + 1)}


def replica_log_bytes(data_dir: Path, topic: str, partition: int, high_watermark: int, scratch: Path) -> bytes:
    """The batches below ``high_watermark`` in one broker's segment files for the partition, read with our
    own log code from a copy of its directory (the broker keeps running)."""
    copy = scratch / f"{data_dir.parent.name}-{topic}-{partition}"
    shutil.copytree(data_dir / "logs" / f"{topic}-{partition}", copy)
    plog = PartitionLog(copy, LogConfig(), auto_high_watermark=False)
    try:
        return plog.read(plog.log_start_offset, 1 << 30, max_offset=high_watermark)
    finally:
        plog.close_without_checkpoint()


def check_replicas_identical(cluster: FaultCluster, topic: str, records: dict[int, list[tuple[int, bytes]]],
                             scratch: Path) -> dict[int, dict[int, int]]:
    """Every replica holds the same batches, byte for byte, below the high watermark, and they are the
    records a consumer reads; returns partition -> offset -> producer epoch, read from those batches."""
    scratch.mkdir(parents=True, exist_ok=True)
    epochs = {}
    for partition, found in records.items():
        high_watermark = found[-1][0] + 1 if found else 0
        copies = {i: replica_log_bytes(cluster.brokers[i].data_dir, topic, partition, high_watermark, scratch)
                  for i in cluster.partitions(topic)[partition]["replica_nodes"]}
        digests = {i: (len(data), hash(data)) for i, data in copies.items()}
        assert len(set(copies.values())) == 1, f"{topic}-{partition} replicas differ: {digests}"
        on_disk = [r.value for r in decode_records_any(next(iter(copies.values())))]
        assert on_disk == [value for _offset, value in found], f"{topic}-{partition}: segment files and fetch differ"
        epochs[partition] = producer_epochs(next(iter(copies.values())))
    return epochs


def check_sequence_kept(workload: AckedWorkload) -> None:
    """The idempotent producer never lost its place: no OUT_OF_ORDER_SEQUENCE_NUMBER and no fatal error, which
    would mean a leader's producer state disagreed with what it had been sent and acknowledged (in Kafka a
    producer meets neither under these faults: retries of a batch are found as duplicates, and a batch that
    follows one not yet appended is refused only until that one is retried, which librdkafka does itself)."""
    from confluent_kafka import KafkaError

    assert KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER not in workload.error_codes, workload.errors[-5:]
    assert not workload.fatal, workload.errors[-5:]


def check_after(cluster: FaultCluster, workload: AckedWorkload, scratch: Path) -> dict[int, list[tuple[int, bytes]]]:
    """The checks after a scenario, once every replica is back in every ISR (so each holds everything below
    the high watermark)."""
    check_sequence_kept(workload)
    cluster.wait_healthy(60)
    records = read_topic(cluster.bootstrap, workload.topic, workload.partitions)
    epochs = check_replicas_identical(cluster, workload.topic, records, scratch)
    check_acknowledged(workload, records, epochs)
    return records


def create_topic(cluster: FaultCluster, name: str, replicas: list[list[int]], **configs: str) -> None:
    """A topic with one partition per entry of ``replicas`` (the first of each its preferred leader),
    created through the controller; waits until every broker knows it with a leader."""
    # right after a fault heals the brokers may still be electing one
    controller = cluster.brokers[wait_until(lambda: max(cluster.controller(), 0), 30, interval=0.1,
                                            message="a controller")].bootstrap

    async def ask() -> dict[str, Any]:
        connection = await KafkaConnection.connect(controller, timeout=30)
        async with connection:
            answer = await connection.request(ApiKey.CREATE_TOPICS, {"topics": [{
                "name": name, "num_partitions": -1, "replication_factor": -1,
                "assignments": [{"partition_index": i, "broker_ids": ids} for i, ids in enumerate(replicas)],
                "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
                "timeout_ms": 30000})
            return answer["topics"][0]
    created = asyncio.run(ask())
    assert created["error_code"] == 0, created

    def known_everywhere() -> bool:
        return all(len(cluster.partitions(name, i)) == len(replicas) for i in cluster.running())
    wait_until(known_everywhere, 30, interval=0.1, message=f"every broker to know {name}")
    cluster.wait_healthy(30)


# --- clients of our own: a producer that asks one broker, and a client posing as a follower ------------------

class LoopThread(abc.ABC):
    """A coroutine run in a thread of its own until :meth:`stop`: the tests stay synchronous while it polls."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name=name, daemon=True)
        self.failure: BaseException | None = None

    def start(self) -> LoopThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), f"{self._thread.name} did not stop"
        if self.failure is not None:
            raise self.failure

    async def _main(self) -> None:
        try:
            await self.run()
        except BaseException as exc:  # noqa: BLE001 (raised again by stop())
            self.failure = exc

    @abc.abstractmethod
    async def run(self) -> None: ...


@dataclass
class Attempt:
    sent_at: float
    value: bytes
    error_code: int | None  # None: no answer (timed out, connection lost)
    offset: int = -1


class DirectProducer(LoopThread):
    """``acks=all`` produce requests to one broker only, one record each, a new one every ``interval`` s,
    each answered or given up after ``timeout`` s: what that one broker acknowledges, and when."""

    def __init__(self, broker: str, topic: str, partition: int = 0, interval: float = 0.1,
                 timeout: float = 2.0) -> None:
        super().__init__(f"direct-producer-{topic}")
        self.broker, self.topic, self.partition = broker, topic, partition
        self.interval, self.timeout = interval, timeout
        self.attempts: list[Attempt] = []

    def acknowledged(self) -> list[Attempt]:
        return [a for a in list(self.attempts) if a.error_code == 0]

    async def run(self) -> None:
        connection: KafkaConnection | None = None
        n = 0
        while not self._stop.is_set():
            value = f"{self.partition}:{n}".encode()
            n += 1
            attempt = Attempt(time.monotonic(), value, None)
            self.attempts.append(attempt)
            try:
                if connection is None:
                    connection = await KafkaConnection.connect(self.broker, timeout=self.timeout,
                                                               client_id="direct-producer")
                batch = build_batch([Record(0, int(time.time() * 1000), None, value)])
                answer = await asyncio.wait_for(connection.request(ApiKey.PRODUCE, {
                    "transactional_id": None, "acks": -1, "timeout_ms": int(self.timeout * 1000),
                    "topic_data": [{"name": self.topic, "partition_data": [
                        {"index": self.partition, "records": batch}]}]}), self.timeout + 1)
                part = answer["responses"][0]["partition_responses"][0]
                attempt.error_code, attempt.offset = part["error_code"], part["base_offset"]
            except (OSError, TimeoutError, ClientError, asyncio.IncompleteReadError):
                if connection is not None:
                    with contextlib.suppress(Exception):
                        await connection.close()
                connection = None
            await asyncio.sleep(self.interval)
        if connection is not None:
            await connection.close()


class FakeFollower(LoopThread):
    """An ordinary client connection sending the Fetch requests broker ``replica_id``'s replica fetcher
    would, always from the end of what it was given, as if it stored everything: what a client can do to
    pose as a follower."""

    def __init__(self, broker: str, topic: str, replica_id: int, leader_epoch: int, start: int) -> None:
        super().__init__(f"fake-follower-{replica_id}")
        self.broker, self.topic, self.replica_id, self.leader_epoch = broker, topic, replica_id, leader_epoch
        self.offset = start
        self.error_codes: list[int] = []

    async def run(self) -> None:
        connection = await KafkaConnection.connect(self.broker, timeout=10, client_id="not-a-broker")
        async with connection:
            while not self._stop.is_set():
                answer = await connection.request(ApiKey.FETCH, {
                    "replica_id": self.replica_id, "max_wait_ms": 100, "min_bytes": 1, "max_bytes": 1 << 20,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": self.topic, "partitions": [{
                        "partition": 0, "current_leader_epoch": self.leader_epoch, "fetch_offset": self.offset,
                        "last_fetched_epoch": -1, "log_start_offset": 0, "partition_max_bytes": 1 << 20}]}]})
                error = answer["error_code"] or answer["responses"][0]["partitions"][0]["error_code"]
                self.error_codes.append(error)
                if error:
                    await asyncio.sleep(0.1)
                    continue
                records = answer["responses"][0]["partitions"][0]["records"]
                offsets = [record.offset for record in decode_records_any(records or b"")]
                if offsets:
                    self.offset = max(offsets) + 1


# --- a full disk -----------------------------------------------------------------------------------------------

@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[bool]:
    """A tmpfs of ``size`` mounted at ``path`` for the block (True), or nothing when this is not root (False)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        yield False
        return
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield True
    finally:
        if subprocess.run(["umount", str(path)]).returncode:
            # still busy (a process the test started holds a file there): detached now, gone when released
            subprocess.run(["umount", "--lazy", str(path)], check=True)


@contextlib.contextmanager
def disk_filled(directory: Path) -> Iterator[None]:
    """The file system of ``directory`` filled to the last byte by a ballast file, removed after the block."""
    ballast = directory / "ballast"
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for chunk in (b"\0" * (1 << 20), b"\0" * 512):
            with contextlib.suppress(OSError):  # ENOSPC: full at this granularity
                while True:
                    os.write(fd, chunk)
        yield
    finally:
        os.close(fd)
        ballast.unlink()
