"""A real ZooKeeper for tests: Debian's ``zookeeper`` package, run standalone on a free local port.

    with ZooKeeperServer(tmp_path / "zk") as zk:
        client = KazooClient(hosts=zk.hosts)

The server runs ``org.apache.zookeeper.server.ZooKeeperServerMain`` from /usr/share/java/zookeeper.jar,
whose manifest ``Class-Path`` already names its dependencies (netty, jute, slf4j-api, commons-*, ...);
only an slf4j binding is added so that the server's log goes to ``<dir>/zookeeper.log``. ``start``
waits, with a deadline, until the server answers ``ruok`` with ``imok`` and ``srvr`` with its mode;
``stop`` always ends the process (SIGTERM, then SIGKILL); ``kill`` is a crash (SIGKILL) and ``start``
again brings the same server back on the same port with its data.

Session timeouts: the tick is 200 ms and the minimum session timeout 1 s, so tests can let sessions
expire in about a second.

TLS: given a PEM keystore (key and chain) and a PEM truststore, the server also listens on a
``secureClientPort`` (``secure_hosts``) through Netty, requiring client certificates unless
``client_auth`` says otherwise; the plain port stays for the four-letter health checks.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from harness import free_port

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_BINDING = Path("/usr/share/java/slf4j-simple.jar")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
START_TIMEOUT = 60.0  # seconds; a JVM on a busy two-core machine can take a while


def unavailable() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None when it can."""
    if shutil.which("java") is None:
        return "java is not installed (apt-get install default-jre-headless)"
    if not ZOOKEEPER_JAR.is_file():
        return f"{ZOOKEEPER_JAR} is missing (apt-get install zookeeper)"
    return None


# Netty's codec and resolver, which the TLS connection factory needs besides the jar's own Class-Path
NETTY_EXTRA = [Path("/usr/share/java/netty-codec.jar"), Path("/usr/share/java/netty-resolver.jar"),
               Path("/usr/share/java/netty-transport-native-unix-common.jar")]


def classpath() -> str:
    parts = [str(ZOOKEEPER_JAR), *(str(jar) for jar in NETTY_EXTRA if jar.is_file())]
    if SLF4J_BINDING.is_file():
        parts.append(str(SLF4J_BINDING))
    return os.pathsep.join(parts)


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer ("" when nothing answers)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn:
            conn.sendall(word.encode())
            chunks = []
            while chunk := conn.recv(4096):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class ZooKeeperServer:
    def __init__(self, directory: Path, *, host: str = "127.0.0.1", port: int | None = None,
                 tick_ms: int = 200, min_session_ms: int = 1000, tls: tuple[Path, Path] | None = None,
                 client_auth: str = "need") -> None:
        self.directory = Path(directory)
        self.host = host
        self.port = port or free_port(host)
        self.tick_ms = tick_ms
        self.min_session_ms = min_session_ms
        self.tls = tls  # (PEM keystore: key and chain, PEM truststore)
        self.client_auth = client_auth
        self.secure_port = free_port(host) if tls else None
        self.process: subprocess.Popen | None = None

    @property
    def secure_hosts(self) -> str:
        """The TLS connection string (servers with ``tls`` only)."""
        assert self.secure_port is not None
        return f"{self.host}:{self.secure_port}"

    @property
    def hosts(self) -> str:
        """The connection string for kazoo (and the monitor's ``zookeeper.servers``)."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    def _write_config(self) -> Path:
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(
            f"tickTime={self.tick_ms}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={self.port}\n"
            f"clientPortAddress={self.host}\n"
            f"minSessionTimeout={self.min_session_ms}\n"
            "maxSessionTimeout=60000\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,cons\n"
        )
        if self.tls:
            keystore, truststore = self.tls
            with config.open("a") as f:
                f.write(f"secureClientPort={self.secure_port}\nsecureClientPortAddress={self.host}\n"
                        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"
                        f"ssl.keyStore.location={keystore}\nssl.keyStore.type=PEM\n"
                        f"ssl.trustStore.location={truststore}\nssl.trustStore.type=PEM\n"
                        f"ssl.clientAuth={self.client_auth}\n")
        return config

    def start(self, timeout: float = START_TIMEOUT) -> ZooKeeperServer:
        reason = unavailable()
        if reason:
            raise RuntimeError(f"cannot start ZooKeeper: {reason}")
        if self.process is not None and self.process.poll() is None:
            return self
        config = self._write_config()
        command = ["java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Dzookeeper.jmx.log4j.disable=true", "-cp", classpath(), MAIN_CLASS, str(config)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.ruok():
            if self.process.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.process.returncode} before answering; "
                                   f"last log lines:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"ZooKeeper did not answer ruok within {timeout:.0f} s on {self.hosts}; "
                                   f"last log lines:\n{self.log_tail()}")
            time.sleep(0.1)
        return self

    def ruok(self) -> bool:
        """Whether the server serves requests: ``ruok`` answers as soon as the port is open, while the
        database may still be loading, so ``srvr`` has to report the server's mode too."""
        return (four_letter_word(self.host, self.port, "ruok") == "imok"
                and "Mode: " in four_letter_word(self.host, self.port, "srvr"))

    def stop(self, timeout: float = 15.0) -> None:
        """End the server: SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def kill(self) -> None:
        """Crash the server (SIGKILL): sessions survive on disk, clients see the connection drop."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
