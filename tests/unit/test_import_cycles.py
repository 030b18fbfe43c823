"""The broker's narrow services import nothing that imports them back, counting the imports made for type hints
only (grimp, which import-linter is built on, reads every import of the source)."""

from __future__ import annotations

import grimp
import pytest

# The services handlers and coordinators are given instead of the Broker, and the modules that take only what they
# use of it: none of them may lean on the Broker hub again, not even for a type hint.
OUTSIDE_EVERY_CYCLE = [
    "broker.cluster.view",
    "broker.replica_manager",
    "broker.handlers.services",
    "broker.handlers.metadata_cache",
    "broker.groups.coordinator",
    "broker.cluster.replication",
    "broker.txn.coordinator",
]


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("broker", cache_dir=None)


@pytest.mark.parametrize("module", OUTSIDE_EVERY_CYCLE)
def test_module_is_in_no_import_cycle(graph: grimp.ImportGraph, module: str) -> None:
    back = graph.find_downstream_modules(module) & graph.find_upstream_modules(module)
    assert not back, f"{module} imports, directly or not, modules that import it back: {sorted(back)}"
