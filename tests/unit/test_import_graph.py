"""The import graph of the project's own packages, type-hint imports included (grimp, which import-linter is built
on, reads every import of the source), built once for every check here.

Issue 32: there is no import cycle at all. The Broker is known to ``broker.broker`` alone, which builds the server,
the metrics, the cluster node, the coordinators and the handlers' services and hands itself to them as the narrow
Protocols they declare (``ServedBroker``, ``MeteredBroker``, ``ClusterHost``...): none of them imports it back."""

from __future__ import annotations

import grimp
import pytest

# who may name the Broker: the composition roots that start one
KNOW_THE_BROKER = {"broker.main", "burrowpy.demo"}


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("broker", "burrowpy", cache_dir=None, exclude_type_checking_imports=False)


def _cycles(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """Every direct import that closes a cycle: its imported module leads back to its importer."""
    return sorted((importer, imported) for importer in graph.modules
                  for imported in graph.find_modules_directly_imported_by(importer)
                  if graph.chain_exists(importer=imported, imported=importer))


def test_no_import_cycle(graph: grimp.ImportGraph) -> None:
    assert _cycles(graph) == []


def test_only_the_composition_roots_import_the_broker(graph: grimp.ImportGraph) -> None:
    assert graph.find_modules_that_directly_import("broker.broker") == KNOW_THE_BROKER


def test_the_check_sees_a_cycle_made_by_a_type_hint_import() -> None:
    graph = grimp.ImportGraph()
    for module in ("broker", "broker.log", "broker.protocol"):
        graph.add_module(module)
    graph.add_import(importer="broker.log", imported="broker.protocol")
    assert _cycles(graph) == []
    # what `if TYPE_CHECKING: from broker.log import ...` in the codec would add
    graph.add_import(importer="broker.protocol", imported="broker.log")
    assert _cycles(graph) == [("broker.log", "broker.protocol"), ("broker.protocol", "broker.log")]
