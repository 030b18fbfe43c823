"""Building the SparkSession the pipeline runs in.

Local masters are bound to 127.0.0.1 with the web UI off: the embedded default must not open ports
on other interfaces. Python workers run the interpreter that runs the driver, so executors import the
same burrowpy. Our data sources are registered on every session built here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

DEFAULT_MASTER = "local[*]"


def build_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "burrowpy",
    shuffle_partitions: int | None = None,
    conf: dict[str, str] | None = None,
) -> Any:
    """Get or create the SparkSession for ``master``; ``shuffle_partitions`` defaults to 2 per core locally."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.shuffle.partitions": str(shuffle_partitions or default_shuffle_partitions(master)),
    }
    if master.startswith("local"):
        # Read by the JVM at launch: every Spark service (block manager too) binds to loopback only.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    register_data_sources(session)
    return session


def default_shuffle_partitions(master: str) -> int:
    """Two shuffle partitions per local core; Spark's default of 200 only adds task overhead locally."""
    if master.startswith("local[") and master.endswith("]"):
        cores = master[len("local[") : -1].split(",")[0]
        count = (os.cpu_count() or 1) if cores == "*" else int(cores)
        return max(2, 2 * count)
    if master == "local":
        return 2
    return 200


def register_data_sources(session: Any) -> None:
    from .source import BrokerOffsetsDataSource, KafkaTopicDataSource

    session.dataSource.register(KafkaTopicDataSource)
    session.dataSource.register(BrokerOffsetsDataSource)
