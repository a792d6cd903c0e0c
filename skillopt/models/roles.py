"""A model in a role (optimizer, target) with per-stage token accounting and cost.

Optimizer stages (analyst, merge, ranking, rewrite, lr_autonomous, slow_update, meta_skill,
probe, appendix_consolidate) call :meth:`RoleModel.ask`; usage is tracked per stage so every
step record can carry the deltas.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from skillopt.durable import append_text
from skillopt.errors import ModelError
from skillopt.models._errors import is_retryable
from skillopt.models.base import ChatModel, ChatRequest
from skillopt.models.prefix import PrefixMeter, PromptPrefix, chat_payload, prompt_prefix
from skillopt.types import Message, ModelSpec, Usage

__all__ = ["PriceTable", "RoleModel", "UsageTracker"]

log = structlog.get_logger("skillopt.models")


@dataclass(frozen=True, kw_only=True)
class PriceTable:
    """USD per million tokens, per model name (``"*"`` = any other model): ``(input, output)``
    or ``(input, output, cached_input, cache_write)``; a cache price that is absent or ``None``
    is the input price."""

    prices: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)

    def cost(self, model: str, usage: Usage) -> float:
        """USD of ``usage``: uncached input at the input price, cache reads and writes at
        theirs (a price of 2 numbers ``(input, output)`` prices them as input), output at the
        output price."""
        price = self.prices.get(model) or self.prices.get("*")
        if not price:
            return 0.0
        inp, out = float(price[0] or 0.0), float(price[1] or 0.0)
        cached = price[2] if len(price) > 2 and price[2] is not None else inp
        write = price[3] if len(price) > 3 and price[3] is not None else inp
        uncached = max(0, usage.prompt_tokens - usage.cached_input_tokens - usage.cache_write_input_tokens)
        return (
            uncached * inp
            + usage.cached_input_tokens * cached
            + usage.cache_write_input_tokens * write
            + usage.completion_tokens * out
        ) / 1e6


class UsageTracker:
    """Thread-safe usage per stage.

    With a ledger (:meth:`attach_ledger`) every addition is also appended to a JSON-lines
    file as it happens, so usage survives a crash: calls made by a step that was killed before
    it could persist its state are still counted when the run resumes (:meth:`load_ledger`).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_stage: dict[str, Usage] = {}
        self._ledger: Path | None = None
        #: How much of these calls' input repeats an earlier call's prefix (rebuilt from the
        #: ledger on resume: each line carries its request's prefix digests).
        self.prefix = PrefixMeter()

    def add(self, stage: str, usage: Usage, *, model: str = "", prefix: PromptPrefix | None = None) -> None:
        """Count one call's usage (and, given its prompt's ``prefix``, its cacheable input)."""
        with self._lock:
            self._by_stage[stage] = self._by_stage.get(stage, Usage()) + usage
            if prefix is not None:
                self.prefix.observe(model, prefix, usage.prompt_tokens)
            if self._ledger is not None:
                record: dict[str, Any] = {"stage": stage, **usage.to_dict(), "t": round(time.time(), 3)}
                if prefix is not None:
                    record.update(model=model, prefix=prefix.to_json())
                line = json.dumps(record)
                # One write() per addition; a crash leaves at most a torn last line, a full disk
                # none (the addition is refused whole).
                append_text(self._ledger, line + "\n")

    def attach_ledger(self, path: Path) -> None:
        """Append every later addition to ``path``; when it exists already (a resumed run),
        the totals are rebuilt from it first (it is the complete record)."""
        with self._lock:
            self._ledger = None
        if path.exists():
            self.load_ledger(path)
            with self._lock:
                self._ledger = path
            return
        carried = self.snapshot()  # e.g. restored from a run state written without a ledger
        with self._lock:
            self._by_stage = {}
            self._ledger = path
        for stage, usage in carried.items():
            self.add(stage, usage)

    def load_ledger(self, path: Path) -> None:
        """Replace the totals with the sum of a ledger file (a torn last line is skipped)."""
        totals: dict[str, Usage] = {}
        meter = PrefixMeter()
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                d = json.loads(line)
                stage, u = d["stage"], Usage.from_dict(d)  # a line without its stage is torn
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            totals[stage] = totals.get(stage, Usage()) + u
            prefix = PromptPrefix.from_json(d.get("prefix"))
            if prefix is not None:
                meter.observe(str(d.get("model", "")), prefix, u.prompt_tokens)
        with self._lock:
            self._by_stage = totals
            self.prefix = meter

    def snapshot(self) -> dict[str, Usage]:
        with self._lock:
            return dict(self._by_stage)

    def total(self) -> Usage:
        total = Usage()
        for u in self.snapshot().values():
            total = total + u
        return total

    @staticmethod
    def delta(before: Mapping[str, Usage], after: Mapping[str, Usage]) -> dict[str, dict[str, int]]:
        """Per-stage ``{calls, prompt_tokens, completion_tokens}`` spent between two snapshots."""
        out: dict[str, dict[str, int]] = {}
        for stage, u in after.items():
            d = u - before.get(stage, Usage())
            if d.calls:
                out[stage] = d.to_dict()
        return out

    def to_json(self) -> dict[str, dict[str, int]]:
        return {s: u.to_dict() for s, u in self.snapshot().items()}

    def load(self, totals: Mapping[str, Usage]) -> None:
        """Replace the totals (e.g. with what a ledger of the run sums to)."""
        with self._lock:
            self._by_stage = dict(totals)

    def load_json(self, data: Mapping[str, Mapping[str, int]]) -> None:
        with self._lock:
            self._by_stage = {s: Usage.from_dict(v) for s, v in data.items()}


class RoleModel:
    """A :class:`ChatModel` bound to a role's model spec.

    Args:
        model: the provider endpoint.
        spec: model name and sampling parameters of this role.
        tracker: where usage is recorded.
        retries: extra attempts on top of the SDK's own retries, for answers that are empty and
            for failures that may pass later (:func:`skillopt.models._errors.is_retryable`: rate
            limits, timeouts, 5xx); a rejected key or request is raised at once.
    """

    def __init__(self, model: ChatModel, spec: ModelSpec, tracker: UsageTracker, *, retries: int = 2) -> None:
        self.model = model
        self.spec = spec
        self.tracker = tracker
        self.retries = retries
        #: Prompt-caching key of this role's calls (``""`` = none); each stage adds its name.
        self.cache_key = ""

    def ask(
        self,
        system: str,
        user: str,
        *,
        stage: str,
        max_output_tokens: int | None = None,
        reasoning_effort: str | None = None,
        timeout_s: float | None = None,
    ) -> str:
        """One system+user call; returns the text.

        Raises:
            ModelError: the provider failed after its retries, or kept answering empty text.
        """
        request = ChatRequest(
            model=self.spec.model,
            messages=(Message(role="system", content=system), Message(role="user", content=user)),
            temperature=self.spec.temperature,
            max_output_tokens=max_output_tokens or self.spec.max_output_tokens,
            reasoning_effort=reasoning_effort or self.spec.reasoning_effort,
            timeout_s=timeout_s,
            stage=stage,
            extra=self.spec.extra,
            cache_key=f"{self.cache_key}:{stage}" if self.cache_key else "",
        )
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            t0 = time.monotonic()
            try:
                reply = self.model.complete(request)
            except ModelError as exc:
                self.tracker.add(stage, Usage(calls=1))
                last = exc
                log.warning("model.call_failed", stage=stage, attempt=attempt + 1, error=exc.message)
                if not is_retryable(exc):
                    raise
                continue
            self.tracker.add(
                stage,
                reply.usage if reply.usage.calls else dataclasses.replace(reply.usage, calls=1),
                model=request.model,
                prefix=prompt_prefix(chat_payload(request)),
            )
            if reply.text.strip():
                log.debug("model.call", stage=stage, seconds=round(time.monotonic() - t0, 3))
                return reply.text
            last = ModelError(f"{self.spec.model}: empty answer at stage {stage}")
        assert last is not None
        raise last if isinstance(last, ModelError) else ModelError(str(last))
