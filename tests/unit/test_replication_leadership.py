"""Who acts as a partition's leader in a cluster: only a broker the committed metadata names, caught up with
the quorum since it started, whose replica manager took up that very leader epoch (issue 30)."""

from __future__ import annotations

import pytest

from broker.cluster.isr import acts_as_leader

ME, OTHER = 1, 2


def test_the_leader_of_the_current_epoch_caught_up_acts_as_leader():
    assert acts_as_leader(ME, ME, 4, 4, caught_up=True)


def test_a_broker_replaying_its_journal_does_not_act_as_leader():
    """The operator's case: restarted, its followers unreachable, its journal says it leads."""
    assert not acts_as_leader(ME, ME, 4, 4, caught_up=False)
    assert not acts_as_leader(ME, ME, 4, None, caught_up=False)


@pytest.mark.parametrize(("led_epoch", "why"), [
    (None, "the replica manager has not taken up the leadership"),
    (3, "it still leads in an older epoch"),
    (5, "the metadata it reads is older than the leadership it holds"),
])
def test_a_leadership_not_taken_up_for_the_metadata_epoch_does_not_count(led_epoch, why):
    assert not acts_as_leader(ME, ME, 4, led_epoch, caught_up=True), why


@pytest.mark.parametrize("leader", [OTHER, -1])
def test_a_broker_the_metadata_does_not_name_never_acts_as_leader(leader):
    assert not acts_as_leader(ME, leader, 4, 4, caught_up=True)
