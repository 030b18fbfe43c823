"""The import graph of the project's own packages, type-hint imports included, has no cycle but the Broker hub's
(issue 32): the imports of the whole Broker that the layers contract of pyproject.toml lets through until
narrow services replace them. Emptying that list makes this test hold the whole graph."""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


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


def test_no_import_cycle_counting_type_hint_imports():
    graph = grimp.build_graph("broker", "burrowpy", cache_dir=None, exclude_type_checking_imports=False)
    for importer, imported in _hub_imports():
        assert graph.direct_import_exists(importer=importer, imported=imported), (
            f"{importer} -> {imported} is no longer imported: remove it from the layers contract's ignore_imports")
        graph.remove_import(importer=importer, imported=imported)
    assert _cycles(graph) == []


def test_the_check_sees_a_cycle_made_by_a_type_hint_import():
    graph = grimp.ImportGraph()
    for module in ("broker", "broker.log", "broker.protocol"):
        graph.add_module(module)
    graph.add_import(importer="broker.log", imported="broker.protocol")
    assert _cycles(graph) == []
    # what `if TYPE_CHECKING: from broker.log import ...` in the codec would add
    graph.add_import(importer="broker.protocol", imported="broker.log")
    assert _cycles(graph) == [("broker.log", "broker.protocol"), ("broker.protocol", "broker.log")]
