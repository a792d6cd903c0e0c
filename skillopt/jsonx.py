"""Robust, conservative JSON extraction from LLM output (reference §6.6, without json_repair).

Order of attempts for :func:`extract_json_object` (:func:`extract_json_array` is analogous):

1. Fenced blocks (```` ```json ```` or bare ```` ``` ````; a closing fence must start a line),
   in order: the first whose content parses strictly to an object wins.
2. Scopes, first fence first, then the whole text: a string-aware scanner finds the top-level
   JSON-looking objects (the first non-space character after ``{`` must be ``"`` or ``}``,
   so prose such as ``{not json}`` or ``{name}`` is not a candidate). Exactly one distinct
   object that parses strictly is returned; two or more different ones are ambiguous → None.
3. Repair, only after every scope failed strictly (first fence first), and only in a scope
   holding exactly one candidate: close an unterminated string, escape raw control characters
   inside strings, drop trailing commas, add missing closing brackets. Nothing else is guessed: no quote-style conversion (smart or
   single quotes would have to be told apart from apostrophes in the content), no comments,
   no Python literals.

Every pass is linear in the input, including adversarial input such as 100k unmatched ``{``;
deeply nested input that ``json`` refuses (RecursionError) counts as unparseable.

Usage::

    extract_json_object('Sure! ```json\\n{"edits": []}\\n```')        # {'edits': []}
    extract_json_object('{"a": 1,}')                                   # {'a': 1} (repaired)
    extract_json_object('{"a": 1} and {"b": 2}')                       # None (ambiguous)
    extraction_error('{"a": 1} and {"b": 2}')                          # 'found 2 different ...'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["extract_json_array", "extract_json_object", "extraction_error"]

Kind = Literal["object", "array"]

_FENCE = "```"
_JSON_LANGS = frozenset({"", "json", "jsonc", "json5"})
_WS = " \t\r\n"
_ARRAY_STARTS = frozenset('"{[]-0123456789tfn')
_OPEN_RE = re.compile(r"[{\[]")
_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


@dataclass(frozen=True, slots=True)
class _Fence:
    lang: str
    start: int  # first character of the content
    end: int  # one past the last character of the content
    closed: bool


@dataclass(frozen=True, slots=True)
class _Candidate:
    start: int
    end: int
    closed: bool


def _at_line_start(text: str, k: int) -> bool:
    """Whether only spaces/tabs separate position ``k`` from the previous line break."""
    i = k - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] == "\n"


def _fences(text: str) -> list[_Fence]:
    """Fenced blocks in order; an unclosed final fence runs to the end (truncated output).

    A closing fence must start a line (as in CommonMark), so backticks inside a JSON string
    (an edit whose content holds a code block) do not cut the fence short. Only an inline
    fence (```` ```{"a": 1}``` ````) may close mid-line.
    """
    n = len(text)
    out: list[_Fence] = []
    pos = 0
    while (opener := text.find(_FENCE, pos)) != -1:
        i = opener + 3
        while i < n and text[i] == "`":
            i += 1
        j = i
        while j < n and text[j] not in "\n`":
            j += 1
        info = text[i:j].strip()
        inline = info[:1] in ("{", "[")
        if inline:
            lang, start = "", i
        else:
            lang = info.split()[0].lower() if info else ""
            start = j + 1 if j < n and text[j] == "\n" else j
        k = start
        while (closer := text.find(_FENCE, k)) != -1 and not (inline or _at_line_start(text, closer)):
            k = closer + 3
        if closer == -1:
            out.append(_Fence(lang, start, n, False))
            break
        out.append(_Fence(lang, start, closer, True))
        pos = closer + 3
        while pos < n and text[pos] == "`":
            pos += 1
    return out


def _next_nonspace(text: str, i: int, end: int) -> str:
    while i < end and text[i] in _WS:
        i += 1
    return text[i] if i < end else ""


def _looks_like(text: str, i: int, end: int) -> bool:
    """Whether the bracket at ``i`` opens JSON rather than prose (``{name}``, ``[1]`` cites)."""
    nxt = _next_nonspace(text, i + 1, end)
    if text[i] == "{":
        return nxt in ('"', "}")
    return nxt in _ARRAY_STARTS


def _match_close(text: str, i: int, end: int) -> int | None:
    """One past the bracket closing the one at ``i`` (string-aware), or None if unclosed."""
    open_ch = text[i]
    close_ch = "}" if open_ch == "{" else "]"
    depth = 0
    in_str = False
    escaped = False
    for k in range(i, end):
        ch = text[k]
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return k + 1
    return None


def _candidates(text: str, lo: int, hi: int, kind: Kind) -> list[_Candidate]:
    """Top-level JSON-looking values of ``kind`` in ``text[lo:hi]``.

    Arrays are looked for outside objects only (an object's inner arrays are not top-level).
    An unclosed candidate swallows the rest of the scope, so the scan stops there: this is
    what keeps it linear on input like 100k unmatched ``{``.
    """
    out: list[_Candidate] = []
    i = lo
    while True:
        if kind == "array":
            m = _OPEN_RE.search(text, i, hi)
            j = m.start() if m else -1
        else:
            j = text.find("{", i, hi)
        if j == -1:
            return out
        if not _looks_like(text, j, hi):
            i = j + 1
            continue
        k = _match_close(text, j, hi)
        wanted = (text[j] == "{") == (kind == "object")
        if k is None:
            if wanted:
                out.append(_Candidate(j, hi, False))
            return out
        if wanted:
            out.append(_Candidate(j, k, True))
        i = k


def _loads(s: str) -> tuple[bool, Any, str]:
    try:
        return True, json.loads(s), ""
    except RecursionError:
        return False, None, "nested too deeply"
    except ValueError as exc:  # JSONDecodeError, and int-digit limits
        return False, None, str(exc)


def _drop_trailing_comma(out: list[str]) -> None:
    k = len(out) - 1
    while k >= 0 and out[k] in _WS:
        k -= 1
    if k >= 0 and out[k] == ",":
        del out[k]


def _repair(s: str) -> str | None:
    """Conservative one-pass repair of a single JSON value; None when it needs guessing.

    Fixes: raw control characters inside strings, an unterminated final string, trailing
    commas, missing closing brackets (at the end, or before a closer of an outer bracket). A
    closer with no opener at all is not fixed (we would be guessing the structure).
    """
    out: list[str] = []
    stack: list[str] = []
    open_count = {"}": 0, "]": 0}
    in_str = False
    escaped = False
    for ch in s:
        if in_str:
            if escaped:
                escaped = False
                out.append(ch)
            elif ch == "\\":
                escaped = True
                out.append(ch)
            elif ch == '"':
                in_str = False
                out.append(ch)
            elif ch < " ":
                out.append(_CONTROL_ESCAPES.get(ch, f"\\u{ord(ch):04x}"))
            else:
                out.append(ch)
            continue
        if ch == '"':
            in_str = True
            out.append(ch)
        elif ch in "{[":
            closer = "}" if ch == "{" else "]"
            stack.append(closer)
            open_count[closer] += 1
            out.append(ch)
        elif ch in "}]":
            if not open_count[ch]:
                return None
            while True:
                _drop_trailing_comma(out)
                closer = stack.pop()
                open_count[closer] -= 1
                out.append(closer)
                if closer == ch:
                    break
            if not stack:
                break  # the value is complete; anything after it is not ours
        else:
            out.append(ch)
    if in_str:
        if escaped:
            out.pop()  # a dangling backslash would escape the quote we add
        out.append('"')
    while stack:
        _drop_trailing_comma(out)
        out.append(stack.pop())
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _Outcome:
    value: Any = None
    found: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class _Scope:
    """Strict result of one scope, plus the lone candidate that may be repaired."""

    outcome: _Outcome
    repairable: _Candidate | None = None
    candidates: tuple[_Candidate, ...] = ()


def _scan_scope(text: str, lo: int, hi: int, kind: Kind, where: str) -> _Scope:
    """Step 2 in one scope (a fence's content or the whole text): strict parsing only."""
    cands = tuple(_candidates(text, lo, hi, kind))
    outcome, repairable = _judge(text, cands, kind, where)
    return _Scope(outcome, repairable, cands)


def _judge(
    text: str, cands: tuple[_Candidate, ...], kind: Kind, where: str
) -> tuple[_Outcome, _Candidate | None]:
    expected = dict if kind == "object" else list
    if not cands:
        return _Outcome(reason=f"no JSON {kind} found in {where}"), None
    distinct: list[Any] = []
    unparsed = 0
    for c in cands:
        ok, value, _ = _loads(text[c.start : c.end]) if c.closed else (False, None, "")
        if not (ok and isinstance(value, expected)):
            unparsed += 1
            if kind == "object" and len(cands) > 1:
                break  # an object candidate that fails makes the scope ambiguous anyway
            continue
        if not any(value == d for d in distinct):
            distinct.append(value)
            if len(distinct) > 1:
                break  # ambiguous; stop early so many different values stay linear
    if len(distinct) > 1:
        return _Outcome(
            reason=f"found {len(cands)} different top-level JSON {kind}s in {where}; ambiguous"
        ), None
    # Objects: every candidate must agree. Arrays: unparseable ones are prose brackets.
    if len(distinct) == 1 and (kind == "array" or not unparsed):
        return _Outcome(value=distinct[0], found=True), None
    if len(cands) > 1:
        reason = f"found {len(cands)} JSON-looking {kind}s in {where}, not all valid; ambiguous"
        return _Outcome(reason=reason), None
    return _Outcome(reason=f"the only JSON {kind} in {where} does not parse"), cands[0]


def _repair_scope(text: str, cand: _Candidate, kind: Kind, where: str) -> _Outcome:
    """Step 3: repair the lone candidate of a scope."""
    repaired = _repair(text[cand.start : cand.end])
    if repaired is None:
        return _Outcome(reason=f"the only JSON {kind} in {where} has an unmatched closing bracket")
    ok, value, error = _loads(repaired)
    if ok and isinstance(value, dict if kind == "object" else list):
        return _Outcome(value=value, found=True)
    return _Outcome(reason=f"the only JSON {kind} in {where} does not parse, even after repair: {error}")


def _extract(text: Any, kind: Kind) -> _Outcome:
    if not isinstance(text, str):
        return _Outcome(reason=f"input is not a string ({type(text).__name__})")
    if not text.strip():
        return _Outcome(reason="input is empty")
    expected = dict if kind == "object" else list
    fences = [f for f in _fences(text) if f.lang in _JSON_LANGS]
    for fence in fences:
        ok, value, _ = _loads(text[fence.start : fence.end])
        if ok and isinstance(value, expected):
            return _Outcome(value=value, found=True)
    whole = _scan_scope(text, 0, len(text), kind, "the text")
    scopes: list[tuple[_Scope, str, _Fence | None]] = [(whole, "the text", None)]
    if fences:
        first, where = fences[0], "the first JSON fence"
        scopes.insert(0, (_scan_scope(text, first.start, first.end, kind, where), where, first))
    # Every scope is tried strictly before any is repaired: a valid object in the text beats
    # a "repair" of a fence that was only cut short (which would silently truncate content).
    for scope, _, _ in scopes:
        if scope.outcome.found:
            return scope.outcome
    reasons: list[str] = []
    for scope, where, scope_fence in scopes:
        outcome, cand = scope.outcome, scope.repairable
        if cand is not None and scope_fence is not None and _cut_by_fence(cand, scope_fence, whole):
            # The value runs on past the fence's closer (backticks inside a string the model
            # broke with raw newlines): repairing the fence part would truncate it.
            cand = None
        if cand is not None:
            outcome = _repair_scope(text, cand, kind, where)
            if outcome.found:
                return outcome
        reasons.append(outcome.reason)
    return _Outcome(reason="; ".join(reasons))


def _cut_by_fence(cand: _Candidate, fence: _Fence, whole: _Scope) -> bool:
    """Whether a fence's unclosed candidate is completed only beyond the fence's closer."""
    if cand.closed or not fence.closed:
        return False
    # Only a value that *closes* after the fence proves the closer was inside it; one that
    # never closes is just missing its final bracket, which the fence-local repair fixes.
    return any(c.start == cand.start and c.closed and c.end > fence.end for c in whole.candidates)


def extract_json_object(text: str) -> dict[str, Any] | None:
    """The one JSON object in an LLM answer, or None (see the module docstring for rules).

    Args:
        text: The model's reply.

    Returns:
        The decoded object, or ``None`` when there is none, it is ambiguous, or it is broken
        beyond the conservative repairs; :func:`extraction_error` says which.
    """
    outcome = _extract(text, "object")
    return outcome.value if outcome.found else None


def extract_json_array(text: str) -> list[Any] | None:
    """The one JSON array in an LLM answer, or None.

    Like :func:`extract_json_object`, but arrays nested inside objects are not top-level, and
    bracket pairs that do not parse are ignored as prose (``[1]`` still counts: an answer with
    a citation marker and a real array is ambiguous).

    Args:
        text: The model's reply.

    Returns:
        The decoded array, or ``None``.
    """
    outcome = _extract(text, "array")
    return outcome.value if outcome.found else None


def extraction_error(text: str, kind: Kind = "object") -> str:
    """Why nothing was extracted from ``text`` (for logs); ``""`` when extraction succeeds.

    Args:
        text: The model's reply.
        kind: ``"object"`` or ``"array"``.

    Returns:
        A one-line explanation.
    """
    outcome = _extract(text, kind)
    return "" if outcome.found else outcome.reason
