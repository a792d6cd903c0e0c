"""The request fingerprint idempotency compares: equal content, equal fingerprint; any field
that differs, anywhere in the request, a different one."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox.api import convert
from sandbox.service.validation import fingerprint
from skillopt.types import File, Grading, Limits, ModelSpec, RolloutRequest, SkillVersion, Task, TestCase


def _request(**changes) -> RolloutRequest:
    base = RolloutRequest(
        rollout_id="run/1",
        env="gsm8k",
        agent="qa",
        task=Task(id="t1", instruction="What is 2+2?", attributes={"a": [1, 2.5, None, {"b": True}]}),
        grading=Grading(attributes={"answer": "4"}),
        skill=SkillVersion(content="- check the arithmetic\n"),
        model=ModelSpec(provider="p", model="m", temperature=0.5),
        limits=Limits(wall_time_s=60, max_turns=1),
    )
    return dataclasses.replace(base, **changes)


def test_equal_requests_share_it_and_a_proto_round_trip_keeps_it():
    assert fingerprint(_request()) == fingerprint(_request())
    again = convert.request_from_proto(convert.request_to_proto(_request()))
    assert fingerprint(again) == fingerprint(_request())


@pytest.mark.parametrize(
    "changes",
    [
        {"env": "math500"},
        {"skill": SkillVersion(content="- check the arithmetic")},
        {"model": ModelSpec(provider="p", model="m", temperature=0.6)},
        {"model": ModelSpec(provider="p", model="m")},  # temperature None vs 0.5
        {"limits": Limits(wall_time_s=61, max_turns=1)},
        {"task": Task(id="t1", instruction="What is 2+2?", attributes={"a": [1, 2.5, None, {"b": False}]})},
        {"task": Task(id="t1", instruction="What is 2+2?", attributes={"a": [1, 2.5, None, {"b": 1}]})},
        {"grading": Grading(cases=(TestCase(name="1", files=(File(name="g.xlsx", content=b"x"),)),))},
        {"use_eval_feedback": True},
    ],
)
def test_any_difference_changes_it(changes):
    assert fingerprint(_request(**changes)) != fingerprint(_request())


def test_numbers_that_compare_equal_hash_equal():
    assert fingerprint(_request(limits=Limits(wall_time_s=60.0, max_turns=1))) == fingerprint(_request())


@given(st.text(max_size=40), st.text(max_size=40))
def test_field_boundaries_cannot_be_shifted(a, b):
    # "ab" + "c" and "a" + "bc" must not collide: every string is length-prefixed.
    one = _request(task=Task(id=a, instruction=b))
    two = _request(task=Task(id=a + b, instruction=""))
    assert (fingerprint(one) == fingerprint(two)) == (b == "")
