"""``burrowpy spark``: the offset-history jobs on Spark.

``burrowpy spark evaluate --input HISTORY_DIR --output DIR`` evaluates a recorded history (batch);
``burrowpy spark stream --bootstrap-server HOST:PORT --output DIR`` follows a broker live and writes
status changes. pyspark is imported only when a job runs, so ``burrowpy --help`` stays fast.
"""

from __future__ import annotations

import argparse
import sys

from .replay import ReplaySettings
from .session import DEFAULT_MASTER


def add_arguments(parser: argparse.ArgumentParser) -> None:
    jobs = parser.add_subparsers(dest="spark_job", required=True, metavar="JOB")

    evaluate = jobs.add_parser(
        "evaluate",
        help="evaluate a recorded offset history at regular points in time",
        description="Replay a history directory through the storage rules and "
        "evaluate every partition every --step seconds.",
    )
    evaluate.add_argument("--input", required=True, metavar="HISTORY_DIR", help="history directory (Parquet)")
    evaluate.add_argument(
        "--output",
        required=True,
        metavar="DIR",
        help="output directory: partition_status, group_status, lag_report, report.md",
    )
    evaluate.add_argument(
        "--step",
        type=_positive_int,
        default=60,
        metavar="S",
        help="seconds between evaluation points (default 60)",
    )
    evaluate.add_argument(
        "--report-groups",
        type=_positive_int,
        default=5,
        metavar="N",
        help="groups plotted in the report, largest lag first (default 5)",
    )
    _add_rule_arguments(evaluate)
    _add_spark_arguments(evaluate)

    stream = jobs.add_parser(
        "stream",
        help="follow a broker live and write partition status changes",
        description="Read __consumer_offsets and sample log-end offsets from a broker, "
        "keep per-partition state and write every status change.",
    )
    stream.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="broker to read")
    stream.add_argument("--output", required=True, metavar="DIR", help="status changes (Parquet, appended)")
    stream.add_argument(
        "--checkpoint", metavar="DIR", help="checkpoint directory (default: OUTPUT/_checkpoint)"
    )
    stream.add_argument("--history", metavar="DIR", help="also write every event taken in as history")
    stream.add_argument("--cluster", default="local", help="cluster name written in the rows (default local)")
    stream.add_argument("--offsets-topic", default="__consumer_offsets", metavar="TOPIC")
    stream.add_argument(
        "--starting-offsets",
        choices=("earliest", "latest"),
        default="earliest",
        help="where to start reading the offsets topic (default earliest, like Burrow)",
    )
    stream.add_argument(
        "--sample-interval",
        type=_positive_float,
        default=10.0,
        metavar="S",
        help="seconds between log-end offset samples (Burrow's offset-refresh, default 10)",
    )
    stream.add_argument(
        "--trigger",
        type=_positive_float,
        default=1.0,
        metavar="S",
        help="seconds between micro-batches (default 1)",
    )
    stream.add_argument(
        "--expire-group",
        type=_positive_int,
        default=604800,
        metavar="S",
        help="forget a group's partition after S seconds without commits (default 604800)",
    )
    stream.add_argument("--run-for", type=_positive_float, metavar="S", help="stop after S seconds")
    _add_rule_arguments(stream)
    _add_spark_arguments(stream)


def _add_rule_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--intervals",
        type=_positive_int,
        default=10,
        metavar="N",
        help="commits (and broker offsets) kept per partition (storage intervals, default 10)",
    )
    parser.add_argument(
        "--min-distance",
        type=_non_negative_int,
        default=0,
        metavar="S",
        help="storage min-distance in seconds (default 0)",
    )
    parser.add_argument(
        "--allowed-lag",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="evaluator allowed-lag (default 0)",
    )
    parser.add_argument(
        "--minimum-complete",
        type=float,
        default=0.0,
        metavar="F",
        help="evaluator minimum-complete (default 0.0)",
    )


def _add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master", default=DEFAULT_MASTER, metavar="URL", help=f"Spark master (default {DEFAULT_MASTER})"
    )
    parser.add_argument(
        "--shuffle-partitions",
        type=_positive_int,
        metavar="N",
        help="spark.sql.shuffle.partitions (default: 2 per local core, else 200)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other Spark setting (repeatable)",
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def replay_settings(args: argparse.Namespace) -> ReplaySettings:
    return ReplaySettings(
        intervals=args.intervals,
        min_distance_s=args.min_distance,
        allowed_lag=args.allowed_lag,
        minimum_complete=args.minimum_complete,
    )


def spark_conf(pairs: list[str]) -> dict[str, str]:
    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--conf expects KEY=VALUE, got {pair!r}")
        conf[key.strip()] = value.strip()
    return conf


def run(args: argparse.Namespace) -> int:
    try:
        conf = spark_conf(args.conf)
    except ValueError as error:
        print(f"burrowpy spark: {error}", file=sys.stderr)
        return 2
    if args.spark_job == "evaluate":
        from .evaluate import HistoryError, check_history_path

        try:
            check_history_path(args.input)  # before Spark starts: a wrong path costs no JVM
        except HistoryError as error:
            print(f"burrowpy spark evaluate: {error}", file=sys.stderr)
            return 1
    from .session import build_session

    spark = build_session(
        args.master,
        app_name=f"burrowpy-{args.spark_job}",
        shuffle_partitions=args.shuffle_partitions,
        conf=conf,
    )
    try:
        if args.spark_job == "evaluate":
            return _run_evaluate(spark, args)
        return _run_stream(spark, args)
    finally:
        spark.stop()


def _run_evaluate(spark: object, args: argparse.Namespace) -> int:
    from .evaluate import HistoryError, evaluate_history

    try:
        summary = evaluate_history(
            spark, args.input, args.output, replay_settings(args), args.step, args.report_groups
        )
    except HistoryError as error:
        print(f"burrowpy spark evaluate: {error}", file=sys.stderr)
        return 1
    print(
        f"{summary.events} events, {summary.points} evaluation points, {summary.groups} groups: "
        f"{summary.partition_rows} partition statuses and {summary.group_rows} group statuses in {args.output}"
    )
    return 0


def _run_stream(spark: object, args: argparse.Namespace) -> int:
    from .stream import StreamSettings, run_stream

    settings = StreamSettings(
        bootstrap_servers=args.bootstrap_server,
        output=args.output,
        checkpoint=args.checkpoint or f"{args.output.rstrip('/')}/_checkpoint",
        history=args.history,
        cluster=args.cluster,
        offsets_topic=args.offsets_topic,
        starting_offsets=args.starting_offsets,
        sample_interval_s=args.sample_interval,
        trigger_s=args.trigger,
        expire_group_s=args.expire_group,
        replay=replay_settings(args),
    )
    run_stream(spark, settings, run_for_s=args.run_for)
    return 0
