"""The gate's two vocabularies, one enum each: how it decides (:class:`GateMode`,
``evaluation.gate_mode``) and what it decided (:class:`GateAction`, the ``action`` of a step
record, a slow update's result and the final check).

Both are string enums: a member equals its value (``GateMode.STRICT == "strict"``) and is
written as it, so config files, JSON records and run directories keep the plain strings they
always had. The config parses ``evaluation.gate_mode`` into a :class:`GateMode` (its wording of
a bad value: ``unknown value 'x'; allowed: strict, paired, repeat, sequential``).
"""

from __future__ import annotations

import enum

__all__ = ["GateAction", "GateMode"]


class GateMode(enum.StrEnum):
    """How the gate decides (docs/gate.md, "The gate modes")."""

    STRICT = "strict"
    """The candidate's mean strictly above the current skill's (the reference's rule)."""
    PAIRED = "paired"
    """A one-sided paired test over the selection items, significant at ``gate_alpha``."""
    REPEAT = "repeat"
    """Every selection item rolled out ``gate_repeats`` times per skill, then ``paired``."""
    SEQUENTIAL = "sequential"
    """Rounds over the selection items until a group-sequential paired test stops."""

    @property
    def tests(self) -> bool:
        """A paired test decides (every mode but ``strict``, where the test is only recorded)."""
        return self is not GateMode.STRICT

    def rollouts_per_item(self, repeats: int) -> int:
        """Rollouts per selection item and skill in one measurement: ``repeats``
        (``evaluation.gate_repeats``) in the ``repeat`` gate, else 1."""
        return repeats if self is GateMode.REPEAT else 1


class GateAction(enum.StrEnum):
    """What the gate did with a candidate."""

    ACCEPT_NEW_BEST = "accept_new_best"
    """Accepted and above the best score so far: it becomes the current and the best skill."""
    ACCEPT = "accept"
    """Accepted: it becomes the current skill; the best skill stays."""
    REJECT = "reject"
    """Rejected: nothing changes."""
    FORCE_ACCEPT = "force_accept"
    """Made current without a decision: the gate off (``evaluation.use_gate: false``), or a
    slow update with ``optimizer.slow_update_gate_with_selection: false`` (which never becomes
    the best skill on its own)."""

    @property
    def accepted(self) -> bool:
        """The candidate became the current skill (every action but ``reject``)."""
        return self is not GateAction.REJECT
