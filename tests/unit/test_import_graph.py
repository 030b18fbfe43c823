"""The import graph of the project's own packages, type-hint imports included (grimp, which import-linter is built
on, reads every import of the source), built once for every check here.

Issue 32: the handlers and the narrow services they are given are in no import cycle at all, and the only cycles
left run through the Broker hub: the imports of the whole Broker that the layers contract of pyproject.toml lets
through. Emptying that list makes the cycle check hold the whole graph."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]

# The services handlers and coordinators are given instead of the Broker, and the modules that take only what they
# use of it: none of them may lean on the Broker hub again, not even for a type hint. Every handler module is
# checked besides these.
OUTSIDE_EVERY_CYCLE = [
    "broker.cluster.view",
    "broker.replica_manager",
    "broker.groups.coordinator",
    "broker.cluster.replication",
    "broker.txn.coordinator",
    "broker.server",
]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("broker", "burrowpy", cache_dir=None, exclude_type_checking_imports=False)


def _hub_imports() -> list[tuple[str, str]]:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")
    pairs = [line.split(" -> ") for line in layers.get("ignore_imports", [])]
    return [(importer.strip(), imported.strip()) for importer, imported in pairs]


def _cycles(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """Every direct import that closes a cycle: its imported module leads back to its importer."""
    return sorted((importer, imported) for importer in graph.modules
                  for imported in graph.find_modules_directly_imported_by(importer)
                  if graph.chain_exists(importer=imported, imported=importer))


def test_no_import_cycle_but_through_the_broker_hub(graph: grimp.ImportGraph) -> None:
    without_hub = copy.deepcopy(graph)  # the whole graph stays whole for the other checks
    for importer, imported in _hub_imports():
        assert without_hub.direct_import_exists(importer=importer, imported=imported), (
            f"{importer} -> {imported} is no longer imported: remove it from the layers contract's ignore_imports")
        without_hub.remove_import(importer=importer, imported=imported)
    assert _cycles(without_hub) == []


def _handler_modules() -> list[str]:
    return sorted(f"broker.handlers.{path.stem}" for path in (ROOT / "broker" / "handlers").glob("*.py")
                  if path.stem != "__init__")


@pytest.mark.parametrize("module", OUTSIDE_EVERY_CYCLE + ["broker.handlers", *_handler_modules()])
def test_module_is_in_no_import_cycle(graph: grimp.ImportGraph, module: str) -> None:
    back = graph.find_downstream_modules(module) & graph.find_upstream_modules(module)
    assert not back, f"{module} imports, directly or not, modules that import it back: {sorted(back)}"


def test_the_check_sees_a_cycle_made_by_a_type_hint_import() -> None:
    graph = grimp.ImportGraph()
    for module in ("broker", "broker.log", "broker.protocol"):
        graph.add_module(module)
    graph.add_import(importer="broker.log", imported="broker.protocol")
    assert _cycles(graph) == []
    # what `if TYPE_CHECKING: from broker.log import ...` in the codec would add
    graph.add_import(importer="broker.protocol", imported="broker.log")
    assert _cycles(graph) == [("broker.log", "broker.protocol"), ("broker.protocol", "broker.log")]
