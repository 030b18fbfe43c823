"""A real Apache Kafka 4.x for tests, run from the jars `make install` puts in tests/peers/java/target.

    with KafkaServer(tmp_path / "kafka") as kafka:          # one combined broker+controller node
        Producer({"bootstrap.servers": kafka.bootstrap})

    with KafkaCluster(tmp_path / "kafka3", nodes=3) as cluster:   # three combined nodes
        cluster.bootstrap, cluster.servers[0].kill(), ...

Each node runs in KRaft mode (no ZooKeeper) on free 127.0.0.1 ports, its log directory formatted
with Kafka's own storage tool (``kafka.tools.StorageTool format``) and a static controller quorum.
``start`` waits, with a deadline, until the broker answers Metadata with itself registered; ``stop``
always ends the process (SIGTERM, then SIGKILL); ``kill`` is a crash and ``start`` again brings the
node back on the same ports with its data. ``java_peer`` runs any other main class of the peers'
classpath (Kafka's CLI tools, the Java client programs under tests/peers/java).
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path

from harness import ROOT, JsonLinesProcess, free_port, wait_until

PEERS_DIR = ROOT / "tests" / "peers" / "java" / "target"
# The Prometheus JMX exporter java agent (`make install`) and the rules the project ships for it
JMX_EXPORTER_JAR = ROOT / "tests" / "peers" / "jmx-exporter" / "jmx_prometheus_javaagent.jar"
JMX_EXPORTER_RULES = ROOT / "config" / "kafka-share-jmx-exporter.yml"
START_TIMEOUT = 120.0  # seconds; a cold JVM on a busy two-core machine is slow
JVM_OPTS = ["-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true"]

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.apache.name = org.apache.kafka
logger.apache.level = {level}
"""


def unavailable() -> str | None:
    """Why Kafka cannot be started here, or None when it can."""
    if not (PEERS_DIR / "lib").is_dir() or not (PEERS_DIR / "peers.jar").is_file():
        return f"{PEERS_DIR} is missing: run `make install` (Maven builds the Java peers)"
    return None


def jmx_exporter_agent(port: int) -> str | None:
    """The JVM option that runs the JMX exporter agent on 127.0.0.1:``port`` with the project's rules, or None
    when `make install` has not fetched the agent."""
    if not JMX_EXPORTER_JAR.is_file():
        return None
    return f"-javaagent:{JMX_EXPORTER_JAR}=127.0.0.1:{port}:{JMX_EXPORTER_RULES}"


def classpath() -> str:
    return os.pathsep.join([str(PEERS_DIR / "peers.jar"), str(PEERS_DIR / "lib" / "*")])


def java_command(main_class: str, *args: str, jvm_opts: Sequence[str] = ("-Xmx512m",)) -> list[str]:
    """The command line that runs ``main_class`` of Kafka or of our Java peers."""
    return ["java", *jvm_opts, "-cp", classpath(), main_class, *args]


# A peer run to completion is a short-lived JVM doing little work: the C1 compiler alone and the serial collector
# start it with about 40% less CPU (two Kafka topic tools: 5.4-6.4 -> 3.0-4.0 s); long-lived nodes keep the defaults.
PEER_JVM_OPTS = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def java_peer(main_class: str, *args: str, timeout: float = 120.0, check: bool = True,
              log_dir: Path | None = None, jvm_opts: Sequence[str] = PEER_JVM_OPTS,
              input: str | None = None) -> subprocess.CompletedProcess:
    """Run a main class of the peers' classpath to completion and return what it printed.

    Kafka's CLI tools are run this way through their main classes, e.g.
    ``java_peer("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b, "--list")``.
    """
    env = dict(os.environ)
    if log_dir is not None:
        log_config = Path(log_dir) / "log4j2-tools.properties"
        log_config.write_text(LOG4J2.format(log=Path(log_dir) / "tools.log", level="INFO"))
        jvm_opts = [*jvm_opts, f"-Dlog4j2.configurationFile={log_config}"]
    result = subprocess.run(java_command(main_class, *args, jvm_opts=jvm_opts), capture_output=True,
                            text=True, timeout=timeout, env=env, input=input)
    if check and result.returncode != 0:
        raise AssertionError(f"{main_class} {' '.join(args)} exited with {result.returncode}:\n"
                             f"stdout:\n{result.stdout[-4000:]}\nstderr:\n{result.stderr[-4000:]}")
    return result


def new_cluster_id() -> str:
    """A cluster id as Kafka's storage tool makes them: a random UUID in URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaServer:
    """One Apache Kafka node (broker and controller in one process) in KRaft mode."""

    def __init__(self, directory: Path, *, node_id: int = 1, port: int | None = None,
                 controller_port: int | None = None, voters: str | None = None,
                 cluster_id: str | None = None, config: dict | None = None,
                 jvm_opts: Sequence[str] = JVM_OPTS, log_level: str = "INFO",
                 format_args: Sequence[str] = (), new_session: bool = False, dynamic_quorum: bool = False) -> None:
        """``dynamic_quorum``: a KIP-853 quorum (formatted ``--standalone``, found through
        controller.quorum.bootstrap.servers), whose voters may change, instead of controller.quorum.voters."""
        self.directory = Path(directory)
        self.node_id = node_id
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        while self.controller_port == self.port:  # free_port may hand out a port twice in a row
            self.controller_port = free_port()
        self.voters = voters or f"{node_id}@127.0.0.1:{self.controller_port}"
        self.cluster_id = cluster_id or new_cluster_id()
        self.extra_config = dict(config or {})
        # more arguments for the storage tool's format, e.g. --add-scram 'SCRAM-SHA-256=[name=u,password=p]'
        self.format_args = list(format_args)
        self.jvm_opts = list(jvm_opts)
        self.log_level = log_level
        self.new_session = new_session  # a session of its own (harness.BrokerProcess says why)
        self.dynamic_quorum = dynamic_quorum
        self.process: subprocess.Popen | None = None
        self._formatted = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def properties_path(self) -> Path:
        return self.directory / "server.properties"

    def properties(self) -> dict[str, str]:
        """server.properties for this node; replication factors suit a single node unless overridden."""
        props = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "50",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # share groups get their assignments on heartbeats: a second apart rather than five
            "group.share.min.heartbeat.interval.ms": "1000",
            "group.share.heartbeat.interval.ms": "1000",
        }
        if self.dynamic_quorum:
            del props["controller.quorum.voters"]
            props["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{self.controller_port}"
        props.update({key: str(value) for key, value in self.extra_config.items()})
        return props

    def _write_config(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{key}={value}\n" for key, value in self.properties().items())
        self.properties_path.write_text(text)
        (self.directory / "log4j2.properties").write_text(
            LOG4J2.format(log=self.log_path, level=self.log_level))

    def format(self) -> None:
        """Format the log directory with Kafka's storage tool (once; a restart keeps the data)."""
        if self._formatted or (self.log_dir / "meta.properties").is_file():
            self._formatted = True
            return
        self._write_config()
        # one token: a cluster id may start with "-", which would read as an option
        java_peer("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                  "-c", str(self.properties_path), "--ignore-formatted", *self.format_args,
                  *(["--standalone"] if self.dynamic_quorum else []), log_dir=self.directory)
        self._formatted = True

    def launch(self) -> None:
        """Start the process without waiting (a cluster starts all nodes, then waits for all)."""
        if unavailable():
            raise AssertionError(unavailable())
        self._write_config()
        self.format()
        jvm = [*self.jvm_opts, f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
               f"-Dkafka.logs.dir={self.directory}"]
        out = open(self.directory / "stdout.log", "ab")  # noqa: SIM115 (closed when reaped)
        self.process = subprocess.Popen(java_command("kafka.Kafka", str(self.properties_path),
                                                     jvm_opts=jvm),
                                        stdout=out, stderr=subprocess.STDOUT, cwd=self.directory,
                                        start_new_session=self.new_session)
        out.close()

    def wait_ready(self, timeout: float = START_TIMEOUT, brokers: int = 1) -> None:
        wait_until(lambda: self._check_alive() and self._registered(brokers), timeout,
                   interval=0.2, message=f"Kafka node {self.node_id} on port {self.port} to serve")

    def start(self, timeout: float = START_TIMEOUT) -> KafkaServer:
        self.launch()
        self.wait_ready(timeout)
        return self

    def _check_alive(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"Kafka exited with {self.process.returncode}:\n{self.log_text()}")
        return True

    def _registered(self, brokers: int) -> bool:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        metadata = admin.list_topics(timeout=2)
        return len(metadata.brokers) >= brokers

    def log_text(self, tail: int = 8000) -> str:
        text = ""
        for path in (self.directory / "stdout.log", self.log_path):
            with contextlib.suppress(OSError):
                text += f"--- {path.name}\n" + path.read_text(errors="replace")[-tail:]
        return text

    def terminate(self) -> None:
        """SIGTERM without waiting, so that ``stop`` of several nodes waits for their shutdowns side by side."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        code = self.process.returncode
        self.process = None
        return code

    def kill(self) -> None:
        """kill -9: the JVM gets no chance to flush or close anything."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def __enter__(self) -> KafkaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KafkaCluster:
    """Several combined KRaft nodes forming one cluster (replication factors set to the node count)."""

    def __init__(self, directory: Path, nodes: int = 3, config: dict | None = None,
                 jvm_opts: Sequence[str] = JVM_OPTS) -> None:
        chosen: list[int] = []
        while len(chosen) < 2 * nodes:  # free_port may hand out a port twice in a row: draw distinct ones
            port = free_port()
            if port not in chosen:
                chosen.append(port)
        ports = list(zip(chosen[::2], chosen[1::2], strict=True))
        voters = ",".join(f"{i + 1}@127.0.0.1:{controller}" for i, (_, controller) in enumerate(ports))
        cluster_id = new_cluster_id()
        replication = str(min(nodes, 3))
        defaults = {"offsets.topic.replication.factor": replication,
                    "transaction.state.log.replication.factor": replication,
                    "share.coordinator.state.topic.replication.factor": replication,
                    "default.replication.factor": replication,
                    "min.insync.replicas": "1"}
        self.servers = [KafkaServer(Path(directory) / f"node-{i + 1}", node_id=i + 1, port=port,
                                    controller_port=controller, voters=voters, cluster_id=cluster_id,
                                    config={**defaults, **(config or {})}, jvm_opts=jvm_opts)
                        for i, (port, controller) in enumerate(ports)]

    @property
    def bootstrap(self) -> str:
        return ",".join(server.bootstrap for server in self.servers)

    def start(self, timeout: float = START_TIMEOUT) -> KafkaCluster:
        try:
            for server in self.servers:
                server.launch()
            for server in self.servers:
                server.wait_ready(timeout, brokers=len(self.servers))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for server in self.servers:
            server.terminate()
        for server in self.servers:
            server.stop()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class JavaApp(JsonLinesProcess):
    """A long-running Java peer (e.g. a Kafka Streams application) printing JSON lines; its shutdown hook
    closes it cleanly on SIGTERM.

        with JavaApp("burrowpy.peers.WordCount", bootstrap, ...) as app:
            wait_until(lambda: app.saw("state", "RUNNING"))
    """

    def __init__(self, main_class: str, *args: str) -> None:
        super().__init__(java_command(main_class, *args))


WORD_COUNT_LINES = ["the quick brown fox", "jumps over the lazy dog", "The dog barks", "a fox, a dog"]


def run_word_count(bootstrap: str, application_id: str, input_topic: str, output_topic: str, state_dir: Path,
                   *options: str, isolation: str = "read_uncommitted") -> JavaApp:
    """Run tests/peers/java's WordCount (Kafka Streams; ``options``: group protocol, processing guarantee)
    until its output holds the counts of :data:`WORD_COUNT_LINES`, written to ``input_topic`` (line i to
    partition i % 2); then stop it and return it (its state lines, its exit code)."""
    import struct
    from collections import Counter

    from confluent_kafka import Consumer, Producer

    with JavaApp("burrowpy.peers.WordCount", bootstrap, application_id, input_topic, output_topic, str(state_dir),
                 *options) as app:
        wait_until(lambda: app.saw("state", "RUNNING"), 120, interval=0.2, message="the Streams application to run")
        producer = Producer({"bootstrap.servers": bootstrap})
        for number, line in enumerate(WORD_COUNT_LINES):
            producer.produce(input_topic, key=str(number), value=line, partition=number % 2)
        assert producer.flush(30) == 0
        expected = Counter(word for line in WORD_COUNT_LINES for word in line.lower().replace(",", "").split())
        counts: dict[str, int] = {}
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{output_topic}-check",
                             "auto.offset.reset": "earliest", "isolation.level": isolation})
        consumer.subscribe([output_topic])
        try:
            def counted() -> bool:
                for message in consumer.consume(100, timeout=0.5):
                    if message.error() is None:
                        counts[message.key().decode()] = struct.unpack(">q", message.value())[0]
                return counts == dict(expected)
            wait_until(counted, 120, interval=0, message=f"the word counts {dict(expected)} (so far {counts})")
        finally:
            consumer.close()
        app.exit_code = app.stop()
    return app
