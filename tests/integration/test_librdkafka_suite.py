"""librdkafka's own test programs against our broker, as librdkafka runs them against its test cluster (a
``test.conf`` naming the bootstrap broker; ``TESTS=<number> ./test-runner``): 0081, its Admin API test (topics,
partitions, ACLs, broker and topic configs, DeleteRecords, groups and their offsets), on a broker with Kafka's
StandardAuthorizer and a super user, as librdkafka's trivup cluster has; and 0082, a consumer whose
fetch.max.bytes (1 MB) is smaller than what its partitions hold (KIP-74). ``make install`` builds the programs
from a git snapshot of confluentinc/librdkafka (LIBRDKAFKA_GIT); without one these tests skip."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import ROOT, BrokerProcess

from broker.security.acl import STANDARD_AUTHORIZER

pytestmark = pytest.mark.integration

TESTS_DIR = ROOT / "tests" / "peers" / "librdkafka" / "tests"
# the Kafka release whose behaviour the programs expect where it changed (0081: UNKNOWN_TOPIC_OR_PART for a
# topic that does not exist, from 2.7); the broker answers as Kafka 4 does
KAFKA_VERSION = "4.0.0"


@pytest.fixture(scope="module")
def test_runner() -> Path:
    runner = TESTS_DIR / "test-runner"
    if not runner.exists():
        pytest.skip(f"librdkafka's test programs are not built ({runner.relative_to(ROOT)}): make install builds them "
                    "from a git snapshot of confluentinc/librdkafka, LIBRDKAFKA_GIT=<its git directory>")
    return runner


@pytest.fixture(scope="module")
def authorizing_broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    """Configured as librdkafka's test cluster (trivup) has its brokers: ACLs enforced (DescribeAcls answers rather
    than SECURITY_DISABLED), with the anonymous client a super user so that the ACLs the test creates for other
    principals do not lock it out; topics created on first use with 4 partitions (0082 produces to three)."""
    process = BrokerProcess(tmp_path_factory.mktemp("librdkafka") / "data", extra_config={
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS", "num.partitions": 4,
        "group.initial.rebalance.delay.ms": 0})
    process.start()
    yield process
    process.stop()


def run_test(runner: Path, number: str, bootstrap: str, directory: Path, timeout: float) -> None:
    """One of librdkafka's tests, failed with its output when the runner reports a failure."""
    conf = directory / "test.conf"
    conf.write_text(f"metadata.broker.list={bootstrap}\n")
    env = {**os.environ, "TESTS": number, "RDKAFKA_TEST_CONF": str(conf), "TEST_KAFKA_VERSION": KAFKA_VERSION,
           "LD_LIBRARY_PATH": f"{runner.parent.parent / 'src'}:{runner.parent.parent / 'src-cpp'}"}
    try:
        done = subprocess.run([str(runner)], cwd=runner.parent, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed it
        output = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
        pytest.fail(f"librdkafka's test {number} did not finish in {timeout} s:\n{output[-6000:]}")
    assert done.returncode == 0, f"librdkafka's test {number} failed:\n{done.stderr[-8000:]}"
    assert f"{number}_" in done.stderr and "PASSED" in done.stderr, done.stderr[-4000:]


def test_0081_admin(test_runner, authorizing_broker, tmp_path):
    run_test(test_runner, "0081", authorizing_broker.bootstrap, tmp_path, timeout=240)


def test_0082_fetch_max_bytes(test_runner, authorizing_broker, tmp_path):
    run_test(test_runner, "0082", authorizing_broker.bootstrap, tmp_path, timeout=180)
