"""Every segment of a run has the one shape the loop drives (``run(ctx, state) -> state``, then
``commit(ctx, state)``), and the names the run state stores for committed segments stay."""

from __future__ import annotations

import inspect

import pytest

from skillopt.trainer.segments import (
    BaselineSegment,
    FinalCheckSegment,
    FinishSegment,
    GateSegment,
    MetaSkillSegment,
    ProposeSegment,
    RolloutReflectSegment,
    SlowUpdateSegment,
)

SEGMENTS = [
    BaselineSegment,
    RolloutReflectSegment,
    ProposeSegment,
    GateSegment,
    SlowUpdateSegment,
    MetaSkillSegment,
    FinalCheckSegment,
    FinishSegment,
]


@pytest.mark.parametrize("cls", SEGMENTS)
def test_every_segment_runs_then_commits(cls):
    segment = cls()
    assert isinstance(segment.name, str) and segment.name
    # A segment that is one stage has that stage's name (the loop announces it).
    assert segment.stage in (None, segment.name)
    for method in ("run", "commit"):
        assert list(inspect.signature(getattr(segment, method)).parameters) == ["ctx", "state"], method


def test_the_stored_names_of_committed_segments_stay():
    # runtime_state.json's step_stages and epoch_stages hold these: a run directory written
    # before must resume.
    assert [RolloutReflectSegment.name, ProposeSegment.name] == ["rollout_reflect", "propose"]
    assert [SlowUpdateSegment.name, MetaSkillSegment.name] == ["slow_update", "meta_skill"]
    assert BaselineSegment.stage == "baseline"
