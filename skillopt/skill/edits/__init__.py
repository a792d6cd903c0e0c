"""Edit operations on the text of a skill file: the model, payload parsing and application.

An edit is one of four ops (reference §6.4): ``append`` (content at the end of the body),
``insert_after`` (content on a new line after the line holding ``target``), ``replace`` (first
occurrence of ``target`` becomes ``content``) and ``delete`` (first occurrence removed).
:func:`apply_edits` applies them in order to the evolving text and reports one status per edit
with the reference's status strings (§6.7), so run directories stay comparable.

Deliberate differences from the reference, each for a reason given where it is implemented:

* a target is matched at its first occurrence *outside* protected regions (the reference
  refuses the edit when the first occurrence overall is protected);
* ``append`` ignores any ``target`` (the reference skips an append whose stray target points
  into a protected region);
* ``append`` (and the ``insert_after`` fallback) goes before the protected regions that *end*
  the text, not before the earliest marker: identical for the usual layout, but a block at
  the top of a hand-edited skill no longer pulls appended text above the body;
* ``append``/``insert_after`` with empty content are skipped (``skipped_empty_content``): they
  would change only whitespace, i.e. the skill hash, and cost a selection evaluation;
* ``insert_after`` inserts exactly one new line (no blank line) and handles targets that end
  with a newline; ``replace`` keeps the whitespace framing the target; ``delete`` of a whole
  line also removes its line break;
* optional whitespace-tolerant matching (off by default) for paraphrase-free but re-wrapped
  targets (§14 item 8);
* after every edit the protected regions are verified byte-for-byte; an edit that changed
  them anyway is rolled back.

The parts, each in its own module, everything imported from here (``skillopt.skill.edits``):
``_model.py`` (what an edit is, and reading edits from a model's answer), ``_text.py`` (where
a target is, and the change each op makes there), ``_apply.py`` (applying edits in order, with
a report on each).

Usage::

    result = apply_edits("# Skill\\n- a\\n", [Edit("insert_after", "- b", "- a")])
    assert result.text == "# Skill\\n- a\\n- b\\n"
"""

from __future__ import annotations

from skillopt.skill.edits._apply import ApplyResult, ApplySummary, EditReport, apply_edits
from skillopt.skill.edits._model import (
    DEFAULT_FILE,
    EDIT_OPS,
    TEXT_OPS,
    Edit,
    ParsedEdits,
    Patch,
    RejectedEdit,
    edits_from_payload,
    normalize_file,
)

__all__ = [
    "DEFAULT_FILE",
    "EDIT_OPS",
    "TEXT_OPS",
    "ApplyResult",
    "ApplySummary",
    "Edit",
    "EditReport",
    "ParsedEdits",
    "Patch",
    "RejectedEdit",
    "apply_edits",
    "edits_from_payload",
    "normalize_file",
]
