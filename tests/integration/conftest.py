"""Fixtures shared by the integration tests: every server is real, on 127.0.0.1, and always stopped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest_zk import zookeeper, zookeeper_module  # noqa: F401  (real ZooKeeper fixtures)
from harness import BrokerProcess
from spark_cluster import TEST_JVM_OPTIONS

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test collected in this folder is an integration test, so ``-m "not integration"`` selects the pure
    ones, and a new module cannot forget its marker. (This hook sees the whole session's items.)"""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def spark_test_jvms() -> Iterator[None]:
    """Every Spark driver the tests start (in-process sessions and `burrowpy spark` subprocesses alike) is
    launched by spark-submit, which adds ``SPARK_SUBMIT_OPTS`` to its JVM's options."""
    before = os.environ.get("SPARK_SUBMIT_OPTS")
    os.environ["SPARK_SUBMIT_OPTS"] = f"{before} {TEST_JVM_OPTIONS}" if before else TEST_JVM_OPTIONS
    yield
    if before is None:
        del os.environ["SPARK_SUBMIT_OPTS"]
    else:
        os.environ["SPARK_SUBMIT_OPTS"] = before


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    """One real broker per test module; tests use their own topic and group names. A module's
    ``BROKER_CONFIG`` (a dict of broker configs) is added to its broker's configuration."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data",
                         extra_config={"group.initial.rebalance.delay.ms": 200,
                                       **getattr(request.module, "BROKER_CONFIG", {})})
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory):
    """One real Apache Kafka 4.x node (KRaft, broker and controller) per test module."""
    from kafka_harness import KafkaServer

    server = KafkaServer(tmp_path_factory.mktemp("kafka"))
    server.start()
    yield server
    server.stop()
