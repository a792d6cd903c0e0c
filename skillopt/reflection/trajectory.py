"""How a result row is shown to the optimizer (reference §3.4, §6.2).

One trajectory block::

    ### Trajectory 1 (id=…)
    Task: …
    Task type: …
    Failure reason: …
    Steps: 3
    Score: hard=0 soft=0.25

    #### Target System Prompt
    …
    #### Target User Prompt
    …
    #### Spreadsheet Preview
    …
    #### Conversation
    [assistant] …
    [execution turn=1 case=1] exit=1 (0.4 s)
    code: …  stdout (tail): …  stderr (tail): …
    [user] …
    [tool_call search] {"q": …}
    [tool result search] …
    [verification] …

Two token savers that lose nothing (the reference has neither):

* when the current skill appears verbatim inside the target system prompt, it is replaced by a
  pointer to the ``## Current Skill`` section the optimizer already has (with 8 trajectories per
  call this saves 8 copies of the skill);
* a ``trace.notes`` entry (e.g. the spreadsheet preview) that already appears verbatim in the
  target user prompt is not repeated.

The conversation is **not truncated** (the reference removed its limits on purpose: the
analyst must see what went wrong). ``max_chars`` is an opt-in cap for a whole block: when set
and exceeded, the middle of the block is cut so the header (task, prompts) and the tail (last
turns and verification) both survive, with a marker saying how much was omitted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillopt.types import ExecRecord, Message, RolloutResult

__all__ = [
    "FAILURE_EPSILON",
    "format_trajectory",
    "is_failure",
    "reflectable",
    "split_rows",
    "task_info",
]

#: A row is a failure when ``hard`` is below this; a fractional hard (0.5) is a success, as in
#: the reference's reflection split.
FAILURE_EPSILON = 1e-9

_SKILL_POINTER = "[the current skill is inserted here; it is shown above under ## Current Skill]"


def is_failure(row: RolloutResult) -> bool:
    """Whether the optimizer treats ``row`` as a failure (``hard < 1e-9``; NaN counts too)."""
    hard = row.hard
    return not (hard >= FAILURE_EPSILON)


def reflectable(rows: Iterable[RolloutResult]) -> list[RolloutResult]:
    """``rows`` without infrastructure failures: those are not the skill's fault, so no
    analyst, comparison or probe ever sees them."""
    return [r for r in rows if r.infra_error is None]


def split_rows(rows: Iterable[RolloutResult]) -> tuple[list[RolloutResult], list[RolloutResult]]:
    """``(failures, successes)`` of the reflectable rows, in input order."""
    ok = reflectable(rows)
    return [r for r in ok if is_failure(r)], [r for r in ok if not is_failure(r)]


def task_info(row: RolloutResult, task_texts: Mapping[str, tuple[str, str]] | None = None) -> tuple[str, str]:
    """``(task text, task type)`` of a row: from ``task_texts`` first, then the row's metrics."""
    text, kind = ("", "")
    if task_texts and row.id in task_texts:
        text, kind = task_texts[row.id]
    if not kind:
        kind = str(row.metrics.get("task_type") or row.metrics.get("instruction_type") or "")
    return text, kind


def _title(key: str) -> str:
    return " ".join(w.capitalize() for w in key.replace("-", "_").split("_") if w)


def _number(x: float) -> str:
    return f"{x:.4g}"


def _execution(ex: ExecRecord) -> str:
    flags = [f"exit={ex.exit_code if ex.exit_code is not None else 'none'}"]
    if ex.timed_out:
        flags.append("TIMED OUT")
    if ex.oom_killed:
        flags.append("OOM KILLED")
    lines = [f"[execution turn={ex.turn} case={ex.case}] {' '.join(flags)} ({ex.duration_s:.1f} s)"]
    if ex.code.strip():
        lines.append(f"code:\n```python\n{ex.code.strip()}\n```")
    if ex.stdout_tail.strip():
        lines.append(f"stdout (tail):\n{ex.stdout_tail.rstrip()}")
    if ex.stderr_tail.strip():
        lines.append(f"stderr (tail):\n{ex.stderr_tail.rstrip()}")
    return "\n".join(lines)


def _tool_call(call: Mapping[str, Any]) -> str:
    name = str(call.get("name") or "tool")
    args = call.get("arguments")
    if not isinstance(args, str):
        try:
            args = json.dumps(args, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            args = str(args)
    return f"[tool_call {name}] {args}"


def _message(msg: Message) -> str:
    role = msg.role or "message"
    if role == "system":
        # Post-hoc evaluation details (may hold gold values, for the analyst only).
        content = msg.content.strip()
        return content if content.startswith("[verification]") else f"[verification] {content}"
    if role == "tool":
        label = f"[tool result {msg.name}]" if msg.name else "[tool result]"
        return f"{label} {msg.content.strip()}"
    parts = [f"[{role}] {msg.content.strip()}"] if msg.content.strip() or not msg.tool_calls else []
    parts += [_tool_call(c) for c in msg.tool_calls]
    return "\n".join(parts)


def _conversation(row: RolloutResult, skip_first_system: bool, skip_first_user: bool) -> list[str]:
    """Conversation lines with each execution placed after the assistant turn that made it.

    Executions carry the 1-based assistant turn number; ones that match no assistant turn
    (e.g. the final run on the other test cases) follow the conversation's last assistant turn.
    """
    trace = row.trace
    messages = list(trace.messages)
    if skip_first_system and messages and messages[0].role == "system":
        messages = messages[1:]
    if skip_first_user:
        for i, m in enumerate(messages):
            if m.role == "user":
                if m.content == trace.user_prompt:
                    del messages[i]
                break
    by_turn: dict[int, list[ExecRecord]] = {}
    for ex in trace.executions:
        by_turn.setdefault(ex.turn, []).append(ex)
    n_assistant = sum(m.role == "assistant" for m in messages)
    out: list[str] = []
    turn = 0
    for m in messages:
        if m.role == "system" and turn >= n_assistant:
            # Verification comes after every execution, including the unmatched ones.
            for t in sorted(k for k in by_turn if k > n_assistant or k < 1):
                out += [_execution(ex) for ex in by_turn.pop(t)]
        out.append(_message(m))
        if m.role == "assistant":
            turn += 1
            out += [_execution(ex) for ex in by_turn.pop(turn, [])]
    for t in sorted(by_turn):
        out += [_execution(ex) for ex in by_turn[t]]
    return out


def _cap(text: str, max_chars: int | None) -> str:
    if max_chars is None or len(text) <= max_chars:
        return text
    marker = "\n[… {n} characters omitted by the per-trajectory cap …]\n"
    room = max(0, max_chars - len(marker.format(n=len(text))))
    head = room * 2 // 5
    tail = room - head
    omitted = len(text) - head - tail
    return text[:head] + marker.format(n=omitted) + (text[-tail:] if tail else "")


def format_trajectory(
    row: RolloutResult,
    *,
    task_text: str = "",
    task_type: str = "",
    index: int = 1,
    skill: str = "",
    heading: str = "###",
    max_chars: int | None = None,
) -> str:
    """The optimizer-facing text of one result row.

    Args:
        row: The rollout result (its trace holds the conversation, executions and prompts).
        task_text: The task statement (the row itself does not carry it).
        task_type: The task's type label (falls back to ``row.metrics`` task/instruction type).
        index: 1-based position in the batch, used in the heading.
        skill: The skill the row was run with; when it appears verbatim in the target system
            prompt it is replaced by a pointer (the optimizer sees it once, as Current Skill).
        heading: Markdown level of the block heading (sub-sections get one more ``#``).
        max_chars: Optional cap on the whole block (``None``: no cap, the default); see the
            module docstring for how it cuts.

    Returns:
        The block, without a trailing separator.
    """
    trace = row.trace
    sub = heading + "#"
    if not task_type:
        task_type = str(row.metrics.get("task_type") or row.metrics.get("instruction_type") or "")
    lines = [
        f"{heading} Trajectory {index} (id={row.id})",
        f"Task: {task_text.strip() or '(not given)'}",
        f"Task type: {task_type.strip() or 'unknown'}",
        f"Failure reason: {row.fail_reason.strip() or ('none' if not is_failure(row) else 'unknown')}",
        f"Steps: {row.n_turns}",
        f"Score: hard={_number(row.hard)} soft={_number(row.soft)}",
    ]
    if row.cases:
        passed = sum(c.ok for c in row.cases)
        lines.append(f"Test cases passed: {passed}/{len(row.cases)}")
    system = trace.system_prompt
    if system.strip():
        if skill.strip() and skill.strip() in system:
            system = system.replace(skill.strip(), _SKILL_POINTER, 1)
        lines += ["", f"{sub} Target System Prompt", system.strip()]
    if trace.user_prompt.strip():
        lines += ["", f"{sub} Target User Prompt", trace.user_prompt.strip()]
    notes = dict(trace.notes)
    ordered = sorted(notes, key=lambda k: (k != "spreadsheet_preview", k))
    for key in ordered:
        value = str(notes[key]).strip()
        if not value:
            continue
        if value in trace.user_prompt:
            value = "(shown in the target user prompt above)"
        lines += ["", f"{sub} {_title(key)}", value]
    conversation = _conversation(
        row,
        skip_first_system=bool(trace.system_prompt)
        and _first_is(trace.messages, "system", trace.system_prompt),
        skip_first_user=bool(trace.user_prompt.strip()),
    )
    if conversation:
        lines += ["", f"{sub} Conversation", *conversation]
    elif trace.code.strip():
        lines += ["", f"{sub} Final Code", f"```python\n{trace.code.strip()}\n```"]
    return _cap("\n".join(lines), max_chars)


def _first_is(messages: Sequence[Message], role: str, content: str) -> bool:
    return bool(messages) and messages[0].role == role and messages[0].content == content
