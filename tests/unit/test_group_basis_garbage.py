"""A group's basis, once let go, is freed by reference counting: no cyclic garbage for the collector's full passes.

The trend sampler renews the basis of every group that committed every few seconds; under ingest at fleet scale
that was thousands of bases a minute, and a clock-free basis (a caught-up topic) kept its one evaluation, which
held the basis: a reference cycle, freed only by the collector's full passes (hundreds of ms each, on the loop).
"""

from __future__ import annotations

import gc
from array import array

from burrowpy.evaluator import group
from burrowpy.protocol import CommitWindow, ConsumerPartition

NOW = 1_700_000_000


def caught_up(partitions: int) -> list[ConsumerPartition]:
    """Partitions whose group has committed the log's end ten times: nothing can stop, no record ages."""
    window = array("q")
    for order in range(10):
        window.extend((1000 + order * 100, (NOW - 100 + order * 10) * 1000, NOW * 1000, 0, order))
    return [ConsumerPartition(CommitWindow(window, 10), [1900], 1900)] * partitions


def test_a_clock_free_basis_let_go_leaves_no_cyclic_garbage() -> None:
    parts = caught_up(3)
    basis = group._each_basis("t", parts, 0, 0.0)
    assert basis.clock_free and basis.at(NOW, 0.0) is basis.at(NOW + 5, 0.0)  # kept: else this proves nothing
    assert basis.at(NOW, 0.0).partitions([0, 1, 2])[2].partition == 2  # the kept evaluation still makes them
    del basis
    gc.collect()
    gc.disable()
    try:
        basis = group._each_basis("t", parts, 0, 0.0)
        basis.at(NOW, 0.0).partitions([0, 1, 2])
        del basis
        found = gc.collect()
    finally:
        gc.enable()
    assert found == 0, f"{found} objects of cyclic garbage"


def test_a_basis_let_go_with_its_answer_pieces_kept_leaves_no_cyclic_garbage() -> None:
    """The pieces of JSON an answer keeps with a basis (PartitionFields) hold neither the basis nor its evaluations."""
    from burrowpy.httpserver.status_json import evaluation_json

    parts = [ConsumerPartition(part.offsets, [1900], 1900, f"host-{n}", "c", [NOW * 1000]) for n, part in
             enumerate(caught_up(3))]  # with their broker offsets' times, which the array path needs
    for make in (group._each_basis, lambda topic, parts, lag, minimum: group._columns_basis(topic, parts, lag)):
        gc.collect()
        gc.disable()
        try:
            topic = make("t", parts, 0, 0.0)
            assert topic is not None
            basis = group.GroupBasis([topic])
            evaluation = basis.at("c", "g", NOW)
            assert '"partition":2' in evaluation_json(evaluation, True)
            assert basis.topics[0].fields.encoded is not None  # kept: else this proves nothing
            del basis, evaluation
            found = gc.collect()
        finally:
            gc.enable()
        assert found == 0, f"{found} objects of cyclic garbage"
