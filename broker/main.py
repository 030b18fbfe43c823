"""`burrowpy broker`: run one broker node until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from broker.config_loading import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--listen", metavar="HOST:PORT", help="address to serve Kafka clients on")
    parser.add_argument("--data-dir", metavar="DIR", help="where the logs and broker state live")
    parser.add_argument("--node-id", type=int, metavar="N", help="this broker's id")
    parser.add_argument("--config", metavar="FILE", help="broker YAML config (Kafka server.properties names)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--add-scram", action="append", default=[],
                        metavar="'SCRAM-SHA-256=[name=U,password-file=PATH|password-env=VAR]'",
                        help="add (or replace) a SCRAM credential, in kafka-storage.sh format's syntax, the password "
                             "read from a file (- for a line of standard input) or an environment variable, never "
                             "given on the command line; may be repeated. Kept in the data dir, like those "
                             "AlterUserScramCredentials adds")


async def serve(config) -> None:
    from broker.broker import Broker

    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"broker {config.node_id} listening on {broker.host}:{broker.port}", flush=True)
    try:
        await stop.wait()
    finally:
        await broker.stop()


def configure_logging(level: str) -> None:
    """structlog for the broker process: JSON lines, or a readable console format on a terminal."""
    import logging

    import structlog

    renderer = structlog.dev.ConsoleRenderer() if sys.stdout.isatty() else structlog.processors.JSONRenderer()
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
    )


def run(args: argparse.Namespace) -> int:
    from broker.config import BrokerConfig
    from broker.security.scram import parse_add_scram

    configure_logging(args.log_level)
    try:
        config = BrokerConfig.load(args.config, listen=args.listen, data_dir=args.data_dir, node_id=args.node_id)
        for text in args.add_scram:
            try:
                config.scram_additions.append(parse_add_scram(text, os.environ, sys.stdin))
            except ValueError as exc:
                raise ConfigError("<command line>", "--add-scram", str(exc)) from exc
        if config.cluster is not None:
            from broker.cluster.config import ClusterConfig

            ClusterConfig.from_section(config.cluster, config.node_id)  # its errors, before anything starts
    except ConfigError as exc:
        print(f"burrowpy broker: config error: {exc}", file=sys.stderr)
        return 1
    from broker.metrics import MetricsListenError

    try:
        asyncio.run(serve(config))
    except MetricsListenError as exc:
        print(f"burrowpy broker: {exc}", file=sys.stderr)
        return 1
    return 0
