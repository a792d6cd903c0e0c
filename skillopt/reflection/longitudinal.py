"""Epoch-boundary reflection: slow update and meta skill (reference §1.4, §1.5).

Both compare the previous epoch's skill with the current one on the same train items:

* :func:`comparison_pairs` pairs the two rollouts of each item and labels it ``improved``
  (0→1), ``regressed`` (1→0), ``persistent_fail`` (0→0) or ``stable_success`` (1→1);
* :func:`filter_pairs` applies the pair policy (``mixed`` / ``changed`` / ``unchanged``);
  topping ``changed`` up with further rollouts is the trainer's job (see
  :func:`missing_changed_pairs`);
* :func:`comparison_text` renders the evidence, regressions first;
* :func:`propose_slow_update` asks for replacement guidance for the protected slow-update
  block (addressed to the target) and builds the candidate skill;
* :func:`propose_meta_skill` asks for optimizer-facing lessons; the content is shown to later
  analysts, merges, ranking and autonomous LR wrapped by :func:`meta_skill_block`, and never
  to the target.

Rows with an infrastructure error on either side are skipped: they say nothing about either
skill.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import structlog

from skillopt.errors import ConfigError, ModelError
from skillopt.jsonx import extract_json_object, extraction_error
from skillopt.models.roles import RoleModel
from skillopt.reflection._common import safe_text
from skillopt.reflection.cache import Slot, cache_key, memoized
from skillopt.reflection.prompts import load_prompt
from skillopt.reflection.trajectory import format_trajectory, is_failure, task_info
from skillopt.skill import extract_slow_update_field, remove_protected_markers, replace_slow_update_field
from skillopt.types import RolloutResult

__all__ = [
    "CATEGORIES",
    "CHANGED_CATEGORIES",
    "META_SKILL_HEADING",
    "PAIR_POLICIES",
    "MetaSkillProposal",
    "Pair",
    "PairSide",
    "SlowUpdateProposal",
    "comparison_pairs",
    "comparison_text",
    "filter_pairs",
    "meta_skill_block",
    "missing_changed_pairs",
    "normalize_pair_policy",
    "propose_meta_skill",
    "propose_slow_update",
]

log = structlog.get_logger("skillopt.reflection")

_CACHE_VERSION = 1

Category = Literal["improved", "regressed", "persistent_fail", "stable_success"]
#: Each category by its name (a name read from a file becomes the typed value).
_CATEGORIES: dict[str, Category] = {c: c for c in get_args(Category)}
CATEGORIES: tuple[Category, ...] = ("regressed", "persistent_fail", "improved", "stable_success")
CHANGED_CATEGORIES: frozenset[str] = frozenset({"improved", "regressed"})
PAIR_POLICIES: tuple[str, ...] = ("mixed", "changed", "unchanged")
META_SKILL_HEADING = "## Optimizer Meta Skill"

_POLICY_ALIASES = {
    "mixed": "mixed",
    "default": "mixed",
    "random": "mixed",
    "all": "mixed",
    "changed": "changed",
    "change": "changed",
    "delta": "changed",
    "10_01": "changed",
    "01_10": "changed",
    "unchanged": "unchanged",
    "stable": "unchanged",
    "same": "unchanged",
    "00_11": "unchanged",
}
_NO_GUIDANCE = "(no previous guidance: the slow-update block is empty or absent)"
_FIRST_META = "(no previous meta skill: this is the first update)"
_META_PREAMBLE = (
    "This is the optimizer's own memory from earlier epochs: lessons about which kinds of skill "
    "updates helped or hurt. It is not part of the skill and is never shown to the target. Prefer "
    "it when the evidence below is ambiguous; when the evidence clearly contradicts it, follow "
    "the evidence."
)


# ── pairs ─────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class PairSide:
    """One side (previous or current skill) of a comparison pair."""

    hard: float
    soft: float
    fail_reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"hard": self.hard, "soft": self.soft, "fail_reason": self.fail_reason}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairSide:
        return cls(
            hard=float(data["hard"]), soft=float(data["soft"]), fail_reason=str(data.get("fail_reason", ""))
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Pair:
    """One train item rolled out under the previous and the current epoch's skill.

    Attributes:
        id: Task id.
        task: Task text (from ``task_texts``; may be empty).
        category: ``improved`` | ``regressed`` | ``persistent_fail`` | ``stable_success``.
        prev, curr: Scores and failure reason of each side.
        prev_trajectory, curr_trajectory: The formatted trajectories (not persisted by
            :meth:`to_dict` unless asked).
    """

    id: str
    task: str
    category: Category
    prev: PairSide
    curr: PairSide
    prev_trajectory: str = ""
    curr_trajectory: str = ""

    @property
    def changed(self) -> bool:
        return self.category in CHANGED_CATEGORIES

    def to_dict(self, *, include_trajectories: bool = False) -> dict[str, Any]:
        """JSON form (``comparison_pairs.json`` is written without trajectories)."""
        out: dict[str, Any] = {
            "id": self.id,
            "task": self.task,
            "category": self.category,
            "prev": self.prev.to_dict(),
            "curr": self.curr.to_dict(),
        }
        if include_trajectories:
            out["prev_trajectory"] = self.prev_trajectory
            out["curr_trajectory"] = self.curr_trajectory
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Pair:
        """Inverse of :meth:`to_dict` (trajectories are empty unless they were included).

        Raises:
            KeyError, TypeError, ValueError: not a pair's JSON form.
        """
        category = str(data["category"])
        if category not in _CATEGORIES:
            raise ValueError(f"unknown pair category {category!r}")
        return cls(
            id=str(data["id"]),
            task=str(data.get("task", "")),
            category=_CATEGORIES[category],
            prev=PairSide.from_dict(data["prev"]),
            curr=PairSide.from_dict(data["curr"]),
            prev_trajectory=str(data.get("prev_trajectory", "")),
            curr_trajectory=str(data.get("curr_trajectory", "")),
        )


def _category(prev_ok: bool, curr_ok: bool) -> Category:
    if prev_ok and curr_ok:
        return "stable_success"
    if prev_ok:
        return "regressed"
    return "improved" if curr_ok else "persistent_fail"


def comparison_pairs(
    prev_rows: Sequence[RolloutResult],
    curr_rows: Sequence[RolloutResult],
    *,
    task_texts: Mapping[str, tuple[str, str]] | None = None,
    prev_skill: str = "",
    curr_skill: str = "",
) -> list[Pair]:
    """Pair the two rollouts of each item, in the order of ``prev_rows``.

    An item counts as solved when it is not a failure (``hard >= 1e-9``, so a fractional hard
    counts as solved, consistent with minibatch reflection; the reference's ``bool(hard)`` is
    the same except for hard scores in ``(0, 1e-9)``). Items missing on either side, and items
    with an infrastructure error on either side, are skipped.

    Args:
        prev_rows: Rows of the previous epoch's skill.
        curr_rows: Rows of the current skill on the same items.
        task_texts: ``id → (task text, task type)``.
        prev_skill, curr_skill: The two skills, so their text is not repeated inside each
            trajectory's system prompt (see :func:`format_trajectory`).

    Returns:
        The pairs.
    """
    texts = task_texts or {}
    current = {r.id: r for r in curr_rows}
    pairs: list[Pair] = []
    seen: set[str] = set()
    for p in prev_rows:
        c = current.get(p.id)
        if c is None or p.id in seen or p.infra_error is not None or c.infra_error is not None:
            continue
        seen.add(p.id)
        text, ttype = task_info(p, texts)
        pairs.append(
            Pair(
                id=p.id,
                task=text,
                category=_category(not is_failure(p), not is_failure(c)),
                prev=PairSide(hard=p.hard, soft=p.soft, fail_reason=p.fail_reason),
                curr=PairSide(hard=c.hard, soft=c.soft, fail_reason=c.fail_reason),
                prev_trajectory=format_trajectory(
                    p, task_text=text, task_type=ttype, skill=prev_skill, heading="####"
                ),
                curr_trajectory=format_trajectory(
                    c, task_text=text, task_type=ttype, skill=curr_skill, heading="####"
                ),
            )
        )
    return pairs


def normalize_pair_policy(policy: str) -> str:
    """Canonical pair policy for ``policy`` or an alias (reference §1.4).

    Raises:
        ConfigError: unknown policy; the message lists the accepted names.
    """
    key = str(policy).strip().lower().replace("-", "_")
    if key not in _POLICY_ALIASES:
        raise ConfigError(
            f"unknown longitudinal_pair_policy {policy!r}; expected one of {', '.join(sorted(_POLICY_ALIASES))}"
        )
    return _POLICY_ALIASES[key]


def filter_pairs(pairs: Sequence[Pair], policy: str) -> list[Pair]:
    """Keep the pairs of ``policy``: ``mixed`` all, ``changed`` improved/regressed,
    ``unchanged`` persistent_fail/stable_success. Order is kept."""
    name = normalize_pair_policy(policy)
    if name == "mixed":
        return list(pairs)
    if name == "changed":
        return [p for p in pairs if p.changed]
    return [p for p in pairs if not p.changed]


def missing_changed_pairs(pairs: Sequence[Pair], policy: str, target: int = 20) -> int:
    """How many more changed pairs the trainer should collect (top-up) for ``policy``.

    Only ``changed`` tops up: the trainer rolls out further unseen train items under both
    skills, one at a time, until this returns 0 or the train split runs out.
    """
    if normalize_pair_policy(policy) != "changed":
        return 0
    return max(0, target - sum(p.changed for p in pairs))


_SECTION_TITLES: dict[str, str] = {
    "regressed": "Regressions: solved by the previous epoch's skill, failed by the current one (HIGHEST PRIORITY)",
    "persistent_fail": "Persistent failures: failed by both skills",
    "improved": "Improvements: failed by the previous epoch's skill, solved by the current one",
    "stable_success": "Stable successes: solved by both skills",
}


def _side(label: str, side: PairSide) -> str:
    reason = f", fail_reason={side.fail_reason}" if side.fail_reason else ""
    return f"{label}: hard={side.hard:.4g}, soft={side.soft:.4g}{reason}"


def comparison_text(pairs: Sequence[Pair]) -> str:
    """The comparison evidence for the slow-update and meta-skill prompts.

    Counts first; then regressions, persistent failures and improvements, each pair with both
    trajectories; then stable successes as a list without trajectories.
    """
    counts = {c: sum(p.category == c for p in pairs) for c in CATEGORIES}
    lines = [
        f"## Comparison Summary ({len(pairs)} items)",
        f"- regressed: {counts['regressed']}",
        f"- persistent_fail: {counts['persistent_fail']}",
        f"- improved: {counts['improved']}",
        f"- stable_success: {counts['stable_success']}",
    ]
    for category in ("regressed", "persistent_fail", "improved"):
        group = [p for p in pairs if p.category == category]
        if not group:
            continue
        lines += ["", f"## {_SECTION_TITLES[category]} ({len(group)})"]
        for p in group:
            lines += [
                "",
                f"### Item {p.id}",
                f"Task: {p.task.strip() or '(not given)'}",
                _side("Previous skill", p.prev),
                _side("Current skill", p.curr),
                "",
                "#### Previous-epoch skill run",
                p.prev_trajectory.strip() or "(no trajectory)",
                "",
                "#### Current skill run",
                p.curr_trajectory.strip() or "(no trajectory)",
            ]
    stable = [p for p in pairs if p.category == "stable_success"]
    if stable:
        lines += ["", f"## {_SECTION_TITLES['stable_success']} ({len(stable)})"]
        for p in stable:
            task = " ".join(p.task.split())
            lines.append(f"- {p.id}: {task[:200] or '(task not given)'}")
    return "\n".join(lines) + "\n"


# ── proposals ─────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, kw_only=True, slots=True)
class SlowUpdateProposal:
    """Output of :func:`propose_slow_update`.

    Attributes:
        content: The new guidance for the slow-update block (``""``: nothing proposed, the
            trainer records ``no_content``).
        reasoning: The optimizer's judgement of the previous guidance.
        candidate: The current skill with all slow-update blocks replaced by exactly one
            holding ``content`` (``None`` when there is no content).
        error: Why there is no content (model error, unparsable answer), if so.
    """

    content: str
    reasoning: str = ""
    candidate: str | None = None
    error: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class MetaSkillProposal:
    """Output of :func:`propose_meta_skill` (``content == ""`` when nothing was produced)."""

    content: str
    reasoning: str = ""
    error: str = ""


def _ask_json(
    model: RoleModel, prompt: str, user: str, *, stage: str, max_output_tokens: int
) -> tuple[dict[str, Any] | None, str]:
    try:
        text = model.ask(load_prompt(prompt), user, stage=stage, max_output_tokens=max_output_tokens)
    except ModelError as exc:
        log.warning(f"{stage}.failed", reason="model_error", error_type=type(exc).__name__)
        return None, f"model error ({type(exc).__name__})"
    obj = extract_json_object(text)
    if obj is None:
        detail = extraction_error(text)
        log.warning(f"{stage}.failed", reason="unparsable", detail=detail)
        return None, f"unparsable answer: {detail}"
    return obj, ""


def _skills_section(prev_skill: str, curr_skill: str) -> list[str]:
    return [
        f"## Previous-Epoch Skill\n{prev_skill.strip() or '(empty skill)'}",
        f"## Current Skill\n{curr_skill.strip() or '(empty skill)'}",
    ]


def propose_slow_update(
    prev_skill: str,
    curr_skill: str,
    pairs: Sequence[Pair],
    *,
    model: RoleModel,
    max_output_tokens: int = 16384,
    cache: Slot | None = None,
) -> SlowUpdateProposal:
    """Ask for new slow-update guidance from the epoch comparison (§1.4 step 5-6).

    The prompt gets the previous-epoch skill, the current skill, the existing guidance of the
    current skill's protected block (or a "no previous guidance" placeholder) and
    :func:`comparison_text`. The answer is ``{"reasoning", "slow_update_content"}``.

    With ``cache`` (``proposal.json``) a proposal made from the same skills and pairs is reused;
    one without content is not kept.

    Returns:
        The proposal; never raises for model or parse failures (``error`` says what happened).
    """
    key = cache_key("slow_update", _CACHE_VERSION, _pair_inputs(prev_skill, curr_skill, pairs))
    return memoized(
        cache,
        key,
        lambda: _slow_update(prev_skill, curr_skill, pairs, model=model, max_output_tokens=max_output_tokens),
        encode=_proposal_json,
        decode=lambda d: SlowUpdateProposal(
            content=str(d["content"]),
            reasoning=str(d.get("reasoning", "")),
            candidate=None if d.get("candidate") is None else str(d["candidate"]),
            error=str(d.get("error", "")),
        ),
        keep=lambda p: bool(p.candidate),
    )


def _pair_inputs(prev_skill: str, curr_skill: str, pairs: Sequence[Pair]) -> dict[str, Any]:
    return {
        "prev": prev_skill,
        "curr": curr_skill,
        "pairs": [p.to_dict(include_trajectories=True) for p in pairs],
    }


def _proposal_json(proposal: SlowUpdateProposal | MetaSkillProposal) -> dict[str, Any]:
    return {f: getattr(proposal, f) for f in proposal.__dataclass_fields__}


def _slow_update(
    prev_skill: str, curr_skill: str, pairs: Sequence[Pair], *, model: RoleModel, max_output_tokens: int
) -> SlowUpdateProposal:
    guidance = extract_slow_update_field(curr_skill) or _NO_GUIDANCE
    user = (
        "\n\n".join(
            [
                *_skills_section(prev_skill, curr_skill),
                f"## Existing Slow-Update Guidance\n{guidance}",
                comparison_text(pairs).strip(),
            ]
        )
        + "\n"
    )
    obj, error = _ask_json(
        model, "slow_update", user, stage="slow_update", max_output_tokens=max_output_tokens
    )
    if obj is None:
        return SlowUpdateProposal(content="", error=error)
    content = remove_protected_markers(safe_text(obj.get("slow_update_content"))).strip()
    reasoning = safe_text(obj.get("reasoning")).strip()
    if not content:
        return SlowUpdateProposal(content="", reasoning=reasoning, error="empty slow_update_content")
    return SlowUpdateProposal(
        content=content, reasoning=reasoning, candidate=replace_slow_update_field(curr_skill, content)
    )


def propose_meta_skill(
    prev_skill: str,
    curr_skill: str,
    pairs: Sequence[Pair],
    previous_meta: str,
    *,
    model: RoleModel,
    max_output_tokens: int = 16384,
    cache: Slot | None = None,
) -> MetaSkillProposal:
    """Ask for the next meta skill: compact optimizer-facing lessons (§1.5).

    ``curr_skill`` is the epoch's last-step skill before slow-update injection. The answer is
    ``{"reasoning", "meta_skill_content"}``.

    With ``cache`` (``proposal.json``) a proposal made from the same inputs is reused; one
    without content is not kept.

    Returns:
        The proposal; never raises for model or parse failures.
    """
    inputs = {**_pair_inputs(prev_skill, curr_skill, pairs), "meta": previous_meta}
    return memoized(
        cache,
        cache_key("meta_skill", _CACHE_VERSION, inputs),
        lambda: _meta_skill(
            prev_skill, curr_skill, pairs, previous_meta, model=model, tokens=max_output_tokens
        ),
        encode=_proposal_json,
        decode=lambda d: MetaSkillProposal(
            content=str(d["content"]), reasoning=str(d.get("reasoning", "")), error=str(d.get("error", ""))
        ),
        keep=lambda p: bool(p.content),
    )


def _meta_skill(
    prev_skill: str,
    curr_skill: str,
    pairs: Sequence[Pair],
    previous_meta: str,
    *,
    model: RoleModel,
    tokens: int,
) -> MetaSkillProposal:
    user = (
        "\n\n".join(
            [
                *_skills_section(prev_skill, curr_skill),
                f"## Previous Meta Skill\n{previous_meta.strip() or _FIRST_META}",
                comparison_text(pairs).strip(),
            ]
        )
        + "\n"
    )
    obj, error = _ask_json(model, "meta_skill", user, stage="meta_skill", max_output_tokens=tokens)
    if obj is None:
        return MetaSkillProposal(content="", error=error)
    content = safe_text(obj.get("meta_skill_content")).strip()
    reasoning = safe_text(obj.get("reasoning")).strip()
    return MetaSkillProposal(
        content=content, reasoning=reasoning, error="" if content else "empty meta_skill_content"
    )


def meta_skill_block(content: str) -> str:
    """The ``## Optimizer Meta Skill`` block shown to analysts, merges, ranking and autonomous LR.

    ``""`` for empty content; content that already is such a block is returned as is.
    """
    text = content.strip()
    if not text:
        return ""
    if text.startswith(META_SKILL_HEADING):
        return text
    return f"{META_SKILL_HEADING}\n{_META_PREAMBLE}\n\n{text}"
