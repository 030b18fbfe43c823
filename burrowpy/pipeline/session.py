"""Building the SparkSession the pipeline runs in.

Local masters are bound to 127.0.0.1 with the web UI off: the embedded default must not open ports
on other interfaces. Python workers run the interpreter that runs the driver, so executors import the
same burrowpy. Every session built here has Spark's Kafka source (``format("kafka")``) and our
``burrowpy-broker-offsets`` source.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

DEFAULT_MASTER = "local[*]"
KAFKA_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_2.13"


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
        # Spark's Kafka source finds partitions through the AdminClient by default and leaves internal
        # topics out, __consumer_offsets among them; its consumer-based offset fetching reads them (with
        # the source option kafka.exclude.internal.topics=false).
        "spark.sql.streaming.kafka.useDeprecatedOffsetFetching": "true",
    }
    if master.startswith("local"):
        # Read by the JVM at launch: every Spark service (block manager too) binds to loopback only.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    conf = conf or {}
    if "spark.jars" not in conf and "spark.jars.packages" not in conf:
        settings.update(kafka_connector_conf())
    settings.update(conf)
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
    from .source import BrokerOffsetsDataSource

    session.dataSource.register(BrokerOffsetsDataSource)


def kafka_connector_conf() -> dict[str, str]:
    """How Spark gets its Kafka source (spark-sql-kafka-0-10): the jars ``make install`` put in
    ``BURROWPY_SPARK_JARS`` (default: ``spark-jars`` in this Python environment, ``.venv/spark-jars``), else
    Spark resolves the connector of the installed PySpark's version from Maven Central at start-up
    (``spark.jars.packages``, which needs network access)."""
    import pyspark

    directory = Path(os.environ.get("BURROWPY_SPARK_JARS", Path(sys.prefix) / "spark-jars"))
    jars = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    if jars:
        return {"spark.jars": ",".join(str(jar) for jar in jars)}
    return {"spark.jars.packages": f"{KAFKA_CONNECTOR}:{pyspark.__version__}"}
