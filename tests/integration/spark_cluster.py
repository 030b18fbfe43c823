"""A Spark standalone cluster from the installed PySpark: one master and N workers on 127.0.0.1.

    with SparkStandalone(tmp_path, workers=2) as cluster:
        run(["burrowpy", "spark", "evaluate", "--master", cluster.master_url, ...], env=cluster.env())

Each daemon runs in the foreground through PySpark's ``bin/spark-class`` (so the fixture owns the process
and stops it), binds to 127.0.0.1 (``SPARK_LOCAL_IP`` and ``--host``) on free ports, and logs to its own
file. ``start`` waits, with a deadline, until the master has started and every worker has registered;
``stop`` ends them all (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from harness import free_port, wait_until

START_TIMEOUT = 120.0
# The tests' Spark jobs are small and short: HotSpot's C2 compiler spends most of their CPU compiling
# generated code that runs for seconds (measured: test_pipeline_evaluate.py 174 -> 103 CPU s with C1 alone).
# Applied to the tests' JVMs only, through the variables and settings Spark documents for users.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
EXECUTOR_JVM_CONF = f"spark.executor.extraJavaOptions={TEST_JVM_OPTIONS}"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    def __init__(self, directory: Path, *, workers: int = 2, cores_per_worker: int = 1,
                 memory_per_worker: str = "1g") -> None:
        self.directory = Path(directory)
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker = memory_per_worker
        self.port = free_port()
        self.processes: list[tuple[subprocess.Popen, Path]] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The environment for the daemons and for drivers that use the cluster: loopback only."""
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOCAL_DIRS": str(self.directory / "local"), "SPARK_NO_DAEMONIZE": "1",
                "SPARK_DAEMON_JAVA_OPTS": TEST_JVM_OPTIONS}

    def _launch(self, name: str, main_class: str, *args: str) -> Path:
        log = self.directory / f"{name}.log"
        with open(log, "ab") as out:
            process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), main_class, *args],
                                       stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=self.env(), cwd=self.directory, start_new_session=True)
        self.processes.append((process, log))
        return log

    def _alive(self) -> None:
        for process, log in self.processes:
            if process.poll() is not None:
                raise AssertionError(f"{log.stem} exited with {process.returncode}:\n{self.log_tail(log)}")

    def start(self, timeout: float = START_TIMEOUT) -> SparkStandalone:
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "local").mkdir(exist_ok=True)
        try:
            master_log = self._launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                      "--port", str(self.port), "--webui-port", str(free_port()))
            wait_until(lambda: self._alive() or "Starting Spark master" in master_log.read_text(errors="replace"),
                       timeout, interval=0.2, message="the Spark master to start")
            worker_logs = [
                self._launch(f"worker-{number}", "org.apache.spark.deploy.worker.Worker", self.master_url,
                             "--host", "127.0.0.1", "--port", str(free_port()), "--webui-port", str(free_port()),
                             "--cores", str(self.cores_per_worker), "--memory", self.memory_per_worker,
                             "--work-dir", str(self.directory / f"work-{number}"))
                for number in range(self.workers)]
            wait_until(lambda: self._alive() or all("Successfully registered with master" in log.read_text(
                errors="replace") for log in worker_logs), timeout, interval=0.2,
                message=f"{self.workers} Spark workers to register with the master")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 20.0) -> None:
        processes, self.processes = self.processes, []
        for process, _ in reversed(processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process, _ in processes:
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    @staticmethod
    def log_tail(log: Path, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
