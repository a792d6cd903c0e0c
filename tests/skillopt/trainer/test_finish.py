"""The finish's test evaluations: one evaluation stands for two skills only when the target is
told the same thing by both."""

from __future__ import annotations

from skillopt.skill.document import inject_empty_slow_update_field, replace_slow_update_field
from skillopt.skill.packed import PackageFrame
from skillopt.trainer.segments.finish import _same_behaviour as _same
from skillopt.types import SkillVersion

SKILL = "# Spreadsheets\n\n- Write values, not formulas.\n"


def _same_behaviour(a: str, b: str) -> bool:
    return _same(PackageFrame(), SkillVersion(content=a), SkillVersion(content=b))


def test_the_slow_updates_empty_block_alone_does_not_cost_a_second_test_evaluation():
    with_block = inject_empty_slow_update_field(SKILL)
    assert with_block != SKILL and _same_behaviour(with_block, SKILL) and _same_behaviour(SKILL, with_block)


def test_any_other_difference_is_evaluated_on_its_own():
    with_block = inject_empty_slow_update_field(SKILL)
    filled = replace_slow_update_field(with_block, "- Keep the header row.")
    assert not _same_behaviour(filled, SKILL) and not _same_behaviour(filled, with_block)
    assert not _same_behaviour(SKILL + "- Keep the header row.\n", SKILL)
