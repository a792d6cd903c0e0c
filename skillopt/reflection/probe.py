"""Deep-reflect probe: re-run a few items with a diagnostic instruction, then reflect on both.

The reference has only dead plumbing for this (a ``codex_probe_trace_steps`` row field that
nothing fills). Ours is a three-step flow the trainer drives:

1. :func:`pick_probe_items` chooses a few representative rows: one failure from each of the
   most common ``fail_reason`` groups first, then more failures, then a success or two;
2. :func:`diagnostic_instruction` asks the optimizer for ONE short instruction, appended to
   the target's prompt for a re-run (``RolloutRequest.diagnostic_instruction``), that makes the
   target reveal the cause of its failures (e.g. print what it assumes about the data layout
   before writing code);
3. after the trainer re-ran those items, :func:`reflect_on_probe` shows the original and the
   diagnostic trajectory of each item side by side and asks for a normal analyst patch
   (``source_type="probe"``; merge it with the failure patches).

The diagnostic instruction is a one-off measuring device, never a rule: the prompt says so,
and any edit whose content contains the instruction is dropped mechanically.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import structlog

from skillopt.errors import ConfigError, ModelError
from skillopt.jsonx import extract_json_object, extraction_error
from skillopt.models.roles import RoleModel
from skillopt.reflection._common import safe_text, section, skill_section
from skillopt.reflection.analyst import budget_section
from skillopt.reflection.cache import Slot, cache_key, memoized
from skillopt.reflection.longitudinal import meta_skill_block
from skillopt.reflection.modes import normalize_update_mode
from skillopt.reflection.patches import AnalystReplyError, RawPatch, parse_analyst_reply
from skillopt.reflection.prompts import load_prompt
from skillopt.reflection.trajectory import format_trajectory, is_failure, reflectable, task_info
from skillopt.skill import Edit
from skillopt.skill.edits import RejectedEdit
from skillopt.types import RolloutResult

__all__ = ["MAX_DIAGNOSTIC_CHARS", "diagnostic_instruction", "pick_probe_items", "reflect_on_probe"]

log = structlog.get_logger("skillopt.reflection")

#: A diagnostic instruction longer than this is cut (it is meant to be one short paragraph).
MAX_DIAGNOSTIC_CHARS = 1200
_CACHE_VERSION = 1


def _prefix(row: RolloutResult) -> str:
    return row.fail_reason.split(":", 1)[0].strip() or "unknown"


def pick_probe_items(
    rows: Sequence[RolloutResult],
    *,
    n_failures: int = 2,
    n_successes: int = 1,
    seed: int | None,
) -> list[RolloutResult]:
    """Representative rows to probe, deterministic for a given ``seed``.

    Failures: the ``fail_reason`` prefix groups ordered by size (ties by first appearance);
    one row from each group in that order, then the remaining failures in a seeded random
    order, until ``n_failures``. Successes: a seeded random sample (``Random(seed + 1)``) of
    ``n_successes``. Infra-error rows are never picked. ``seed=None`` takes the first row of each
    group and successes in order.

    Returns:
        Failures first, then successes.
    """
    usable = reflectable(rows)
    failures = [r for r in usable if is_failure(r)]
    successes = [r for r in usable if not is_failure(r)]
    rng = random.Random(seed)
    groups: dict[str, list[RolloutResult]] = {}
    for row in failures:
        groups.setdefault(_prefix(row), []).append(row)
    ordered = sorted(groups.values(), key=lambda g: -len(g))
    picked: list[RolloutResult] = []
    for group in ordered:
        if len(picked) >= n_failures:
            break
        picked.append(group[0] if seed is None else rng.choice(group))
    taken = {id(r) for r in picked}
    rest = [r for r in failures if id(r) not in taken]
    if seed is not None:
        rng.shuffle(rest)
    picked += rest[: max(0, n_failures - len(picked))]
    chosen = list(successes)
    if seed is not None:
        random.Random(seed + 1).shuffle(chosen)
    return picked[: max(0, n_failures)] + chosen[: max(0, n_successes)]


def _blocks(rows: Sequence[RolloutResult], skill: str, task_texts: Mapping[str, tuple[str, str]]) -> str:
    out = []
    for i, row in enumerate(rows, 1):
        text, ttype = task_info(row, task_texts)
        out.append(format_trajectory(row, task_text=text, task_type=ttype, index=i, skill=skill))
    return "\n---\n".join(out)


def diagnostic_instruction(
    skill: str,
    probe_rows: Sequence[RolloutResult],
    *,
    model: RoleModel,
    task_texts: Mapping[str, tuple[str, str]] | None = None,
    max_output_tokens: int = 4096,
    cache: Slot | None = None,
) -> str | None:
    """Ask the optimizer for one short diagnostic instruction for the probe re-run.

    The answer is ``{"reasoning", "diagnostic_instruction"}``; the instruction is stripped
    and cut to :data:`MAX_DIAGNOSTIC_CHARS`. With ``cache`` an instruction made for the same
    skill and rows is reused (the re-runs must see the same one after a resume).

    Returns:
        The instruction, or ``None`` (no rows, model error, unusable answer; logged).
    """
    rows = reflectable(probe_rows)
    if not rows:
        return None
    key = cache_key(
        "probe_diagnostic",
        _CACHE_VERSION,
        {"skill": skill, "rows": [[r.id, r.hard, r.fail_reason] for r in rows]},
    )
    return memoized(
        cache,
        key,
        lambda: _ask_diagnostic(
            skill, rows, model=model, task_texts=task_texts or {}, tokens=max_output_tokens
        ),
        encode=lambda text: {"diagnostic_instruction": text},
        decode=lambda data: str(data["diagnostic_instruction"]) or None,
        keep=lambda text: text is not None,
    )


def _ask_diagnostic(
    skill: str,
    rows: Sequence[RolloutResult],
    *,
    model: RoleModel,
    task_texts: Mapping[str, tuple[str, str]],
    tokens: int,
) -> str | None:
    user = (
        "\n\n".join(
            [
                skill_section(skill),
                f"## Trajectories to Probe ({len(rows)} total)\n{_blocks(rows, skill, task_texts)}",
            ]
        )
        + "\n"
    )
    try:
        text = model.ask(load_prompt("probe_diagnostic"), user, stage="probe", max_output_tokens=tokens)
    except ModelError as exc:
        log.warning("probe.diagnostic_failed", reason="model_error", error_type=type(exc).__name__)
        return None
    obj = extract_json_object(text)
    if obj is None:
        log.warning("probe.diagnostic_failed", reason="unparsable", detail=extraction_error(text))
        return None
    instruction = safe_text(obj.get("diagnostic_instruction")).strip()
    if not instruction:
        log.warning("probe.diagnostic_failed", reason="empty diagnostic_instruction")
        return None
    return instruction[:MAX_DIAGNOSTIC_CHARS].rstrip()


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _leaks(item: object, instruction: str) -> bool:
    """Whether an update item quotes the diagnostic instruction (it must never become a rule)."""
    needle = _norm(instruction)
    if len(needle) < 12:
        return False
    if isinstance(item, Edit):
        texts = [item.content]
    elif isinstance(item, Mapping):
        texts = [str(v) for v in item.values() if isinstance(v, str)]
    else:
        return False
    return any(needle in _norm(t) for t in texts)


def reflect_on_probe(
    original_rows: Sequence[RolloutResult],
    diagnostic_rows: Sequence[RolloutResult],
    skill: str,
    *,
    model: RoleModel,
    budget: int,
    diagnostic_text: str = "",
    update_mode: str = "patch",
    step_buffer_text: str = "",
    meta_skill_text: str = "",
    task_texts: Mapping[str, tuple[str, str]] | None = None,
    cache: Slot | None = None,
    max_output_tokens: int = 16384,
) -> RawPatch | None:
    """One analyst call over original and diagnostic runs of the probed items.

    Items are paired by id; an item whose original or diagnostic row has an infra error (or
    is missing) is left out. The answer uses the normal analyst schema; items are stamped
    ``source_type="probe"`` and cut to ``budget``; items quoting ``diagnostic_text`` are dropped.

    Args:
        original_rows: The probed rows as first rolled out.
        diagnostic_rows: The re-runs with the diagnostic instruction.
        skill: The current skill.
        model: The optimizer.
        budget: ``L``, most items to propose.
        diagnostic_text: The instruction the re-runs got.
        update_mode: ``patch`` or the rewrite mode (full rewrite is not supported).
        step_buffer_text, meta_skill_text: As for :func:`~skillopt.reflection.analyst.reflect`.
        task_texts: ``id → (task text, task type)``.
        cache: Where the patch is kept (``probe_patch.json``); reused when made from the same
            rows, skill and instruction.
        max_output_tokens: Completion budget.

    Returns:
        The patch, or ``None`` (nothing to compare, model error, unusable answer; logged).

    Raises:
        ConfigError: ``update_mode`` is the full-rewrite mode.
    """
    mode = normalize_update_mode(update_mode)
    if mode == "full_rewrite_minibatch":
        raise ConfigError("the probe supports the patch and rewrite_from_suggestions update modes only")
    diag = {r.id: r for r in reflectable(diagnostic_rows)}
    pairs = [(r, diag[r.id]) for r in reflectable(original_rows) if r.id in diag]
    if not pairs:
        return None
    ids = [r.id for r, _ in pairs]
    key = cache_key(
        "probe",
        _CACHE_VERSION,
        {
            "ids": ids,
            "diagnostic": diagnostic_text,
            "skill": skill,
            "budget": budget,
            "mode": mode,
            "buffer": step_buffer_text,
            "meta": meta_skill_text,
            "rows": [[o.hard, o.fail_reason, d.hard, d.fail_reason] for o, d in pairs],
        },
    )
    if (cached := _cached(cache, key)) is not None:
        return cached
    context = _context(skill, budget, mode, step_buffer_text, meta_skill_text)
    user = _probe_message(context, pairs, skill, diagnostic_text, task_texts or {})
    answer = _ask_probe(model, user, mode=mode, ids=ids, max_output_tokens=max_output_tokens)
    if answer is None:
        return None
    raw, parsed = answer
    patch = _screened(parsed, diagnostic_text, budget)
    if cache is not None:
        cache.save(key, {**patch.to_dict(), "diagnostic_text": diagnostic_text, "raw_text": raw})
    return patch


def _cached(cache: Slot | None, key: str) -> RawPatch | None:
    """The patch kept under ``key``, or ``None`` (no cache, no entry, an entry that no longer
    reads as a patch)."""
    data = cache.load(key) if cache is not None else None
    if data is None:
        return None
    try:
        return RawPatch.from_dict(data)
    except AnalystReplyError:
        return None


def _context(skill: str, budget: int, mode: str, step_buffer_text: str, meta_skill_text: str) -> list[str]:
    """The sections the probe analyst's message opens with, as the minibatch analysts' do: the
    skill, the budget, the epoch's earlier steps and the meta skill (when there are any)."""
    context = [skill_section(skill), budget_section(budget, mode)]
    if step_buffer_text.strip():
        context.append(section("## Previous Steps in This Epoch", step_buffer_text))
    if meta_skill_text.strip():
        context.append(meta_skill_block(meta_skill_text))
    return context


def _probe_message(
    context: Sequence[str],
    pairs: Sequence[tuple[RolloutResult, RolloutResult]],
    skill: str,
    diagnostic_text: str,
    task_texts: Mapping[str, tuple[str, str]],
) -> str:
    """The probe analyst's user message: the ``context`` sections (skill, budget, step buffer,
    meta skill), the instruction the re-runs got, then each item's original run beside its
    diagnostic re-run."""
    blocks = []
    for i, (orig, rerun) in enumerate(pairs, 1):
        text, ttype = task_info(orig, task_texts)
        blocks.append(
            "\n".join(
                [
                    f"### Probe {i} (id={orig.id})",
                    "#### Original run",
                    format_trajectory(
                        orig, task_text=text, task_type=ttype, index=i, skill=skill, heading="#####"
                    ),
                    "",
                    "#### Diagnostic re-run",
                    format_trajectory(
                        rerun, task_text=text, task_type=ttype, index=i, skill=skill, heading="#####"
                    ),
                ]
            )
        )
    parts = list(context)
    if diagnostic_text.strip():
        parts.append(
            "## Diagnostic Instruction Used in the Re-runs (a one-off probe; never copy it into the skill)\n"
            + diagnostic_text.strip()
        )
    parts.append(f"## Probed Items ({len(pairs)} total)\n" + "\n---\n".join(blocks))
    return "\n\n".join(parts) + "\n"


def _ask_probe(
    model: RoleModel, user: str, *, mode: str, ids: Sequence[str], max_output_tokens: int
) -> tuple[str, RawPatch] | None:
    """The probe analyst's raw answer and its patch; ``None`` when the call fails or the answer
    is unusable (logged)."""
    prompt = "analyst_probe" + ("_rewrite" if mode == "rewrite_from_suggestions" else "")
    try:
        raw = model.ask(load_prompt(prompt), user, stage="probe", max_output_tokens=max_output_tokens)
    except ModelError as exc:
        log.warning("probe.reflect_failed", reason="model_error", error_type=type(exc).__name__)
        return None
    try:
        patch = parse_analyst_reply(raw, source_type="probe", update_mode=mode, budget=None, chunk_ids=ids)
    except AnalystReplyError as exc:
        log.warning("probe.reflect_failed", reason=str(exc))
        return None
    return raw, patch


def _screened(patch: RawPatch, diagnostic_text: str, budget: int) -> RawPatch:
    """``patch`` without the items that quote the diagnostic instruction (it must never become
    a rule) and cut to ``budget``; each item dropped is recorded with why."""
    kept, dropped = [], list(patch.dropped_items)
    for index, item in enumerate(patch.items):
        if diagnostic_text.strip() and _leaks(item, diagnostic_text):
            dropped.append(RejectedEdit(index, "quotes the diagnostic instruction"))
        else:
            kept.append(item)
    if len(kept) > budget:
        dropped += [RejectedEdit(i, "over the edit budget") for i in range(budget, len(kept))]
        kept = kept[: max(0, budget)]
    return RawPatch(
        source_type="probe",
        minibatch=0,
        ids=patch.ids,
        batch_size=patch.batch_size,
        payload_kind=patch.payload_kind,
        items=tuple(kept),
        reasoning=patch.reasoning,
        failure_summary=patch.failure_summary,
        success_patterns=patch.success_patterns,
        dropped_items=tuple(dropped),
    )
