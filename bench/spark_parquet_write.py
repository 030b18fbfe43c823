"""Benchmark: what the Parquet write of ``partition_status`` costs, by codec and dictionary encoding.

    .venv/bin/python bench/spark_parquet_write.py PARTITION_STATUS_DIR [--master 'local[2]'] [--rounds 2]

PARTITION_STATUS_DIR: a ``partition_status`` output of ``burrowpy spark evaluate`` (e.g. of the 10M-commit
history of ``bench/spark_evaluate.py``). In one SparkSession: the directory read to Spark's noop sink (the
read alone), then read and written again as Parquet with each setting (codec from
``spark.sql.parquet.compression.codec``, dictionary encoding on or off through ``parquet.enable.dictionary``),
``--rounds`` times each, interleaved; the write's cost is the job's less the read's. Wall and the JVM's CPU
seconds (/proc), the output's size on disk. The first round pays the JIT compiler: read the later ones.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_stage_cpu import cpu_split  # noqa: E402

from burrowpy.pipeline.evaluate import PARTITION_STATUS_COLUMNS  # noqa: E402
from burrowpy.pipeline.session import build_session  # noqa: E402

SETTINGS = (
    ("snappy", "true"),  # Spark's default
    ("uncompressed", "true"),
    ("lz4_raw", "true"),
    ("zstd", "true"),
    ("snappy", "false"),
)


def size_of(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("*.parquet"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("partition_status", type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    spark = build_session(args.master, app_name="burrowpy-bench", conf={"spark.driver.memory": "4g"})
    spark.range(1).count()
    frame = spark.read.parquet(str(args.partition_status)).select(*PARTITION_STATUS_COLUMNS)
    with tempfile.TemporaryDirectory(prefix="burrowpy-parquet-") as temporary:
        for round_index in range(args.rounds):
            for label, codec, dictionary in (("read, noop sink", None, None),
                                             *((f"{c}, dictionary {d}", c, d) for c, d in SETTINGS)):
                started, (jvm, _) = time.perf_counter(), cpu_split()
                if codec is None:
                    frame.write.format("noop").mode("overwrite").save()
                    size = ""
                else:
                    out = Path(temporary) / "out"
                    frame.write.mode("overwrite").option("compression", codec) \
                        .option("parquet.enable.dictionary", dictionary).parquet(str(out))
                    size = f", {size_of(out) / 1e6:.1f} MB"
                wall, cpu = time.perf_counter() - started, cpu_split()[0] - jvm
                print(f"round {round_index + 1}, {label}: wall {wall:.1f} s, JVM {cpu:.1f} CPU s{size}; "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
