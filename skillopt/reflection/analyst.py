"""Minibatch reflection: the analysts that turn trajectories into raw patches (§6.1-6.4).

:func:`reflect` splits the reflectable rows (infrastructure failures are left out) into
failures (``hard < 1e-9``) and successes, shuffles each deterministically (failures with
``Random(seed)``, successes with ``Random(seed + 1)``), cuts chunks of ``minibatch_size`` and
makes one optimizer call per chunk, all chunks concurrently. Each answer becomes a frozen
:class:`RawPatch`; a chunk whose call fails or whose answer cannot be parsed yields ``None``,
is logged with its reason and counted, and never raises.

Resume: with ``cache`` (a :class:`~skillopt.reflection.cache.StageCache`) each parsed chunk
is kept as entry ``minibatch_{fail|succ}_{idx:03d}`` (parsed patch, raw answer, ids), keyed by
everything the chunk's prompt is made of, and reused instead of calling the model; a chunk
made from other inputs is recomputed and its entry replaced.

Usage::

    params = ReflectParams(env="spreadsheetbench", budget=4, seed=17)
    result = reflect(rows, skill, params, model=optimizer,
                     cache=run_dir.stage_cache("steps/step_0001/patches"))
    patches = [*result.failure_patches, *result.success_patches]
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from skillopt.errors import ModelError
from skillopt.models.roles import RoleModel
from skillopt.reflection._common import package_guide, section, skill_section
from skillopt.reflection.cache import StageCache, cache_key
from skillopt.reflection.longitudinal import meta_skill_block
from skillopt.reflection.modes import PayloadKind, normalize_update_mode, payload_key
from skillopt.reflection.patches import (
    AnalystReplyError,
    Item,
    RawPatch,
    SourceType,
    parse_analyst_reply,
    parse_items,
    stamp,
)
from skillopt.reflection.prompts import analyst_system_prompt
from skillopt.reflection.trajectory import format_trajectory, split_rows, task_info
from skillopt.skill import dedup_notes
from skillopt.types import RolloutResult

__all__ = [
    "AnalystReplyError",
    "ChunkFailure",
    "Item",
    "RawPatch",
    "ReflectParams",
    "ReflectResult",
    "analyst_user_message",
    "budget_section",
    "make_minibatches",
    "parse_analyst_reply",
    "parse_items",
    "reflect",
    "stamp",
]

log = structlog.get_logger("skillopt.reflection")

_CACHE_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class ChunkFailure:
    """A chunk whose analyst call produced nothing usable."""

    source_type: SourceType
    minibatch: int
    ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ReflectResult:
    """Output of :func:`reflect`.

    Attributes:
        failure_patches: Parsed failure-analyst patches, in chunk order.
        success_patches: Parsed success-analyst patches, in chunk order.
        n_calls: Model calls made (cached chunks make none).
        n_failed_chunks: Chunks that yielded no patch.
        appendix_notes: Skill-aware notes of all patches, deduplicated in order.
        n_chunks: Chunks in total (failure + success).
        n_cached: Chunks reloaded from ``cache``.
        failures: Why each failed chunk failed.
    """

    failure_patches: tuple[RawPatch, ...] = ()
    success_patches: tuple[RawPatch, ...] = ()
    n_calls: int = 0
    n_failed_chunks: int = 0
    appendix_notes: tuple[str, ...] = ()
    n_chunks: int = 0
    n_cached: int = 0
    failures: tuple[ChunkFailure, ...] = field(default=())

    @property
    def patches(self) -> tuple[RawPatch, ...]:
        return self.failure_patches + self.success_patches

    @property
    def failure_summaries(self) -> list[Mapping[str, Any]]:
        """Every failure-summary entry of the failure patches, in chunk order (step buffer)."""
        return [s for p in self.failure_patches for s in p.failure_summary]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReflectParams:
    """What one :func:`reflect` call is asked to do, apart from its data (the rows and the
    skill) and its helpers (the model, the cache). The trainer builds one per batch from the
    run's config and the step's prompt context; it is checked when built.

    Raises:
        ConfigError: unknown ``update_mode``.
        ValueError: ``budget < 0`` or ``minibatch_size < 1``.
    """

    env: str | None
    """Env name, for its own analyst prompts (``None``: the generic ones)."""
    budget: int
    """``L``, the most items one analyst may propose (the trainer passes the constant learning
    rate, as the reference). Ignored in full-rewrite mode."""
    seed: int | None
    """Minibatch shuffling seed (the batch seed); ``None`` keeps the rows' order."""
    minibatch_size: int = 8
    """Trajectories per analyst call."""
    workers: int = 16
    """Concurrent analyst calls."""
    failure_only: bool = False
    """Skip the success analysts."""
    update_mode: str = "patch"
    """``patch`` | ``rewrite_from_suggestions`` | ``full_rewrite_minibatch`` (or an alias)."""
    step_buffer_text: str = ""
    """:meth:`StepBuffer.format_for_prompt` output (the epoch's earlier steps), or ``""``."""
    meta_skill_text: str = ""
    """The active meta skill (bare or wrapped), or ``""``."""
    skill_aware: bool = False
    """Skill-aware reflection: adds the prompt sections and reads the appendix notes."""
    skill_aware_source: str = "failure"
    """Whose notes are read: ``failure`` (the default) or ``both`` (the success analysts too)."""
    max_output_tokens: int | None = None
    """Completion budget per call; ``None``: 16384, or 64000 in full-rewrite mode."""
    trajectory_max_chars: int | None = None
    """Cap on each trajectory's text (see :func:`format_trajectory`); ``None``: no cap."""

    def __post_init__(self) -> None:
        normalize_update_mode(self.update_mode)
        if self.budget < 0:
            raise ValueError(f"budget must be >= 0, got {self.budget}")
        if self.minibatch_size < 1:
            raise ValueError(f"minibatch_size must be >= 1, got {self.minibatch_size}")


# ── minibatches and prompts ───────────────────────────────────────────────────────────────


def _shuffled(rows: Sequence[RolloutResult], seed: int | None) -> list[RolloutResult]:
    out = list(rows)
    if seed is not None:
        random.Random(seed).shuffle(out)
    return out


def _chunks(rows: Sequence[RolloutResult], size: int) -> list[list[RolloutResult]]:
    return [list(rows[i : i + size]) for i in range(0, len(rows), size)]


def make_minibatches(
    rows: Sequence[RolloutResult],
    *,
    minibatch_size: int = 8,
    seed: int | None = None,
    failure_only: bool = False,
) -> tuple[list[list[RolloutResult]], list[list[RolloutResult]]]:
    """``(failure_chunks, success_chunks)`` exactly as :func:`reflect` builds them.

    Rows with ``infra_error`` are dropped first. Failures are shuffled with ``Random(seed)``,
    successes with ``Random(seed + 1)`` (no shuffling when ``seed`` is None), then cut into
    consecutive chunks of ``minibatch_size`` (the last may be short).

    Raises:
        ValueError: ``minibatch_size < 1``.
    """
    if minibatch_size < 1:
        raise ValueError(f"minibatch_size must be >= 1, got {minibatch_size}")
    failures, successes = split_rows(rows)
    if failure_only:
        successes = []
    f = _shuffled(failures, seed)
    s = _shuffled(successes, None if seed is None else seed + 1)
    return _chunks(f, minibatch_size), _chunks(s, minibatch_size)


def budget_section(budget: int, update_mode: str) -> str:
    """The budget section of an analyst message for ``update_mode``."""
    mode = normalize_update_mode(update_mode)
    if mode == "patch":
        return f"## Edits Budget\nProduce at most L={budget} edits."
    if mode == "rewrite_from_suggestions":
        return f"## Suggestions Budget\nProduce at most L={budget} suggestions."
    return (
        "## Update Format\nProduce exactly one complete replacement skill in `skill_candidates`; "
        "no edit budget applies in this mode."
    )


def analyst_user_message(
    skill: str,
    trajectories: Sequence[str],
    *,
    source_type: Literal["failure", "success"],
    budget: int,
    update_mode: str = "patch",
    step_buffer_text: str = "",
    meta_skill_text: str = "",
) -> str:
    """The analyst's user message, sections in the reference order (§6.2).

    ``## Current Skill``, the budget section, ``## Previous Steps in This Epoch`` (if any),
    ``## Optimizer Meta Skill`` (if any), then ``## Failed Trajectories (N total)`` or
    ``## Successful Trajectories (N total)`` with the blocks separated by ``---``.
    ``meta_skill_text`` may be the bare content or an already wrapped block.
    """
    parts = [skill_section(skill), *package_guide(skill, normalize_update_mode(update_mode))]
    parts.append(budget_section(budget, update_mode))
    if step_buffer_text.strip():
        parts.append(section("## Previous Steps in This Epoch", step_buffer_text))
    if meta_skill_text.strip():
        parts.append(meta_skill_block(meta_skill_text))
    label = "Failed" if source_type == "failure" else "Successful"
    body = "\n---\n".join(t.strip() for t in trajectories)
    parts.append(f"## {label} Trajectories ({len(trajectories)} total)\n{body}")
    return "\n\n".join(parts) + "\n"


# ── the stage ─────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class _Job:
    source_type: Literal["failure", "success"]
    index: int
    rows: tuple[RolloutResult, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.rows)

    def cache_name(self) -> str:
        tag = "fail" if self.source_type == "failure" else "succ"
        return f"minibatch_{tag}_{self.index:03d}.json"


@dataclass(frozen=True, slots=True)
class _Outcome:
    patch: RawPatch | None
    called: bool
    cached: bool = False
    reason: str = ""


def _load_cached(data: Mapping[str, Any] | None, job: _Job, kind: PayloadKind) -> RawPatch | None:
    if data is None:
        return None
    try:
        patch = RawPatch.from_dict(data)
    except AnalystReplyError:
        return None
    if patch.payload_kind != kind or patch.source_type != job.source_type:
        return None
    return patch


def reflect(
    rows: Sequence[RolloutResult],
    skill: str,
    params: ReflectParams,
    *,
    model: RoleModel,
    cache: StageCache | None = None,
    task_texts: Mapping[str, tuple[str, str]] | None = None,
) -> ReflectResult:
    """Run the failure and success analysts over the minibatches of ``rows``.

    Args:
        rows: The step's result rows (infra-error rows are left out here).
        skill: The current skill text.
        params: The budget, minibatch size, update mode, prompt context and the rest.
        model: The optimizer.
        cache: Where chunk results are kept and reused (the batch's ``patches/``: one entry
            per chunk, ``minibatch_{fail|succ}_NNN.json``, keyed by the chunk's inputs).
        task_texts: ``id → (task text, task type)``.

    Returns:
        The patches, call and failure counts, and the appendix notes.
    """
    fail_chunks, succ_chunks = make_minibatches(
        rows, minibatch_size=params.minibatch_size, seed=params.seed, failure_only=params.failure_only
    )
    jobs = [_Job("failure", i, tuple(c)) for i, c in enumerate(fail_chunks)]
    jobs += [_Job("success", i, tuple(c)) for i, c in enumerate(succ_chunks)]
    analyst = _Analyst(skill, params, model=model, cache=cache, task_texts=task_texts or {})
    if jobs:
        with ThreadPoolExecutor(max_workers=max(1, min(params.workers, len(jobs)))) as pool:
            outcomes = list(pool.map(analyst.guarded, jobs))
    else:
        outcomes = []
    return _result(jobs, outcomes)


class _Analyst:
    """One :func:`reflect` call's analyst: asks about one chunk at a time (from any thread)."""

    def __init__(
        self,
        skill: str,
        params: ReflectParams,
        *,
        model: RoleModel,
        cache: StageCache | None,
        task_texts: Mapping[str, tuple[str, str]],
    ) -> None:
        self.skill = skill
        self.params = params
        self.model = model
        self.cache = cache
        self.task_texts = task_texts
        self.mode = normalize_update_mode(params.update_mode)
        self.kind = payload_key(self.mode)
        self.tokens = params.max_output_tokens or (64000 if self.mode == "full_rewrite_minibatch" else 16384)

    def guarded(self, job: _Job) -> _Outcome:
        """:meth:`run`, with a crash kept to its chunk (one chunk must never sink the step)."""
        try:
            return self.run(job)
        except Exception as exc:
            log.exception("reflect.chunk_crashed", source_type=job.source_type, minibatch=job.index)
            return _Outcome(None, called=False, reason=f"internal error ({type(exc).__name__})")

    def run(self, job: _Job) -> _Outcome:
        """The chunk's patch: from the cache when it was made from the same inputs, else asked
        for and kept; ``None`` with the reason when the call fails or its answer is unusable."""
        key = self.key(job)
        if self.cache is not None:
            cached = _load_cached(self.cache.load(job.cache_name(), key), job, self.kind)
            if cached is not None:
                return _Outcome(cached, called=False, cached=True)
        p = self.params
        system = analyst_system_prompt(
            job.source_type,
            env=p.env,
            update_mode=self.mode,
            skill_aware=p.skill_aware,
            skill_aware_source=p.skill_aware_source,
        )
        try:
            raw = self.model.ask(system, self.message(job), stage="analyst", max_output_tokens=self.tokens)
        except ModelError as exc:
            return _Outcome(None, called=True, reason=f"model error ({type(exc).__name__})")
        try:
            patch = parse_analyst_reply(
                raw,
                source_type=job.source_type,
                update_mode=self.mode,
                budget=p.budget,
                chunk_ids=job.ids,
                minibatch=job.index,
                skill_aware=p.skill_aware
                and (job.source_type == "failure" or p.skill_aware_source == "both"),
            )
        except AnalystReplyError as exc:
            return _Outcome(None, called=True, reason=str(exc))
        if self.cache is not None:
            self.cache.save(job.cache_name(), key, {**patch.to_dict(), "raw_text": raw})
        return _Outcome(patch, called=True)

    def key(self, job: _Job) -> str:
        """The chunk's cache key: everything its prompt is made of."""
        p = self.params
        return cache_key(
            "analyst",
            _CACHE_VERSION,
            {
                "skill": self.skill,
                "source": job.source_type,
                "rows": [[r.id, r.hard, r.soft, r.fail_reason] for r in job.rows],
                "mode": self.mode,
                "budget": p.budget,
                "buffer": p.step_buffer_text,
                "meta": p.meta_skill_text,
                "skill_aware": [p.skill_aware, p.skill_aware_source],
                "env": p.env,
            },
        )

    def message(self, job: _Job) -> str:
        """The chunk's user message: the skill, the budget, the context, its trajectories."""
        blocks = []
        for i, row in enumerate(job.rows, 1):
            text, ttype = task_info(row, self.task_texts)
            blocks.append(
                format_trajectory(
                    row,
                    task_text=text,
                    task_type=ttype,
                    index=i,
                    skill=self.skill,
                    max_chars=self.params.trajectory_max_chars,
                )
            )
        return analyst_user_message(
            self.skill,
            blocks,
            source_type=job.source_type,
            budget=self.params.budget,
            update_mode=self.mode,
            step_buffer_text=self.params.step_buffer_text,
            meta_skill_text=self.params.meta_skill_text,
        )


def _result(jobs: Sequence[_Job], outcomes: Sequence[_Outcome]) -> ReflectResult:
    """The chunks' outcomes gathered in chunk order; each failed chunk logged with its reason."""
    failures: list[ChunkFailure] = []
    fail_p: list[RawPatch] = []
    succ_p: list[RawPatch] = []
    for job, out in zip(jobs, outcomes, strict=True):
        if out.patch is None:
            log.warning(
                "reflect.chunk_failed", source_type=job.source_type, minibatch=job.index, reason=out.reason
            )
            failures.append(
                ChunkFailure(source_type=job.source_type, minibatch=job.index, ids=job.ids, reason=out.reason)
            )
        elif job.source_type == "failure":
            fail_p.append(out.patch)
        else:
            succ_p.append(out.patch)
    notes = dedup_notes(n for p in (*fail_p, *succ_p) for n in p.appendix_notes)
    return ReflectResult(
        failure_patches=tuple(fail_p),
        success_patches=tuple(succ_p),
        n_calls=sum(o.called for o in outcomes),
        n_failed_chunks=len(failures),
        appendix_notes=tuple(notes),
        n_chunks=len(jobs),
        n_cached=sum(o.cached for o in outcomes),
        failures=tuple(failures),
    )
