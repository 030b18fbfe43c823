"""The `burrowpy` command: serve | broker | demo | topics | spark | auth.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and ``run(args) -> int``.
Those modules keep heavy imports (pyspark, aiokafka) inside ``run`` so that ``burrowpy --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "serve": ("burrowpy.daemon", "run the monitor daemon from a YAML (or Burrow TOML) config"),
    "broker": ("broker.main", "run a Kafka-protocol broker node"),
    "demo": ("burrowpy.demo", "embedded broker + monitor + a small workload (what `make run` starts)"),
    "topics": ("broker.admin", "create, list, describe and delete topics on a broker"),
    "spark": ("burrowpy.pipeline.cli", "evaluate offset history on Spark (batch and streaming)"),
    "auth": ("burrowpy.httpauth", "make credentials for the HTTP API: password hashes and bearer tokens"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line; only ``command``'s module is imported for its options (all with None).

    Importing every subcommand's module costs about 0.2 s (the broker's log and client among them), which
    every start of every subcommand paid before; the others are listed by name and help text alone.
    """
    parser = argparse.ArgumentParser(prog="burrowpy", description="Kafka consumer-lag monitoring and broker")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if command is None or command == name:
            module = importlib.import_module(module_name)
            module.add_arguments(sub)
            sub.set_defaults(_module=module)
    return parser


def parser_for(argv: list[str]) -> argparse.ArgumentParser:
    """The parser for these arguments: with the named subcommand's module only, when they start with one."""
    return build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)


def main(argv: list[str] | None = None) -> int:
    args = parser_for(sys.argv[1:] if argv is None else argv).parse_args(argv)
    try:
        return int(args._module.run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
