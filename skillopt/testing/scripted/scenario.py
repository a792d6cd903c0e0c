"""Scenarios: ordered rules that decide what the scripted model server answers.

A scenario is a list of :class:`Rule`. For each request the first rule whose :class:`Match`
fits answers it; an optional ``default`` rule answers when none does (without one, an unmatched
request gets a 400 error, never a silent answer).

A rule holds a list of replies. The reply is chosen *statelessly* from the request: the index is
the request's turn index (the number of model turns already in the conversation), clamped to the
last reply. The one exception is a transient error (``error`` with ``times: N``): it fails only
the first N requests that reach it and then falls through to the next reply. Transient errors do
not occupy a turn slot of their own; they sit in front of the reply that follows them, so
``[{error: {status: 429, times: 1}}, {text: hi}]`` answers turn 0 with 429 once, then ``hi``.

File form (YAML or JSON)::

    rules:
      - name: make-file
        match: {api: responses, contains: "create a file"}
        replies:
          - shell: "printf hi > hello.txt"
          - text: "Done: created hello.txt"
      - name: flaky
        match: {regex: 'job-(\\d+)'}
        replies:
          - error: {status: 429, message: "slow down", times: 1, retry_after_s: 0.01}
          - text: "finished job {{1}} on turn {{turn}}"
    default:
      replies: [{text: "ok"}]

In YAML, quote strings that hold ``{{...}}`` placeholders (unquoted ``{{`` starts a flow
mapping) and write regexes in single quotes (double quotes treat ``\\`` as an escape).

A bare list is read as ``rules``. Unknown keys are errors, so a typo never silently changes a
test. See :class:`ScriptedReply` for reply fields and :func:`render_template` for placeholders.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillopt.errors import ConfigError
from skillopt.testing.scripted.request import ScriptedRequest

__all__ = [
    "APIS",
    "ErrorReply",
    "Match",
    "Rule",
    "Scenario",
    "ScenarioError",
    "ScenarioLike",
    "ScriptedReply",
    "ShellCommand",
    "ToolCall",
    "UsageOverride",
    "render_template",
]

APIS = ("chat", "responses", "messages")
SSE_MODES = ("full", "minimal", "nocomplete")


class ScenarioError(ConfigError):
    """A scenario is malformed (unknown key, bad value) or cannot be applied to a request."""


def _strs(value: Any, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ScenarioError(f"scenario: `{key}` must be a string or a list of strings, got {value!r}")


def _check_keys(obj: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise ScenarioError(f"scenario: unknown key(s) {unknown} in {where}; allowed: {sorted(allowed)}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Match:
    """What a request must look like for a rule to answer it. Every criterion is optional and
    all given ones must hold.

    Attributes:
        contains: substrings that must all occur in the request's full text (system, messages,
            tool calls, tool results).
        regex: a pattern searched (``re.S``) in the full text; its groups feed templates.
        model: glob patterns (``gpt-*``); the requested model must match one.
        api: ``chat``, ``responses`` and/or ``messages``.
        path: glob patterns on the URL path without query (``/v1/messages``).
    """

    contains: tuple[str, ...] = ()
    regex: str | None = None
    model: tuple[str, ...] = ()
    api: tuple[str, ...] = ()
    path: tuple[str, ...] = ()
    _compiled: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("contains", "model", "api", "path"):
            object.__setattr__(self, name, _strs(getattr(self, name), name))
        bad = [a for a in self.api if a not in APIS]
        if bad:
            raise ScenarioError(f"scenario: match.api {bad} unknown; allowed: {list(APIS)}")
        if self.regex is not None:
            try:
                object.__setattr__(self, "_compiled", re.compile(self.regex, re.S))
            except re.error as exc:
                raise ScenarioError(f"scenario: bad match.regex {self.regex!r}: {exc}") from exc

    @classmethod
    def from_obj(cls, obj: Mapping[str, Any] | None) -> Match:
        """Build from the file form (a mapping with the attribute names as keys)."""
        if obj is None:
            return cls()
        if not isinstance(obj, Mapping):
            raise ScenarioError(f"scenario: `match` must be a mapping, got {obj!r}")
        _check_keys(obj, ("contains", "regex", "model", "api", "path"), "match")
        return cls(**dict(obj))

    def test(self, req: ScriptedRequest) -> dict[str, str] | None:
        """Template variables from the regex when the request fits, else None."""
        if self.api and req.api not in self.api:
            return None
        if self.model and not any(fnmatch.fnmatchcase(req.model, p) for p in self.model):
            return None
        if self.path and not any(fnmatch.fnmatchcase(req.path, p) for p in self.path):
            return None
        text = req.text if (self.contains or self._compiled) else ""
        if any(c not in text for c in self.contains):
            return None
        variables: dict[str, str] = {}
        if self._compiled is not None:
            m = self._compiled.search(text)
            if m is None:
                return None
            variables["match"] = m.group(0)
            for i, g in enumerate(m.groups(), start=1):
                variables[str(i)] = g or ""
            variables.update({k: v or "" for k, v in m.groupdict().items()})
        return variables


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    """A tool call the model makes. ``arguments`` is a JSON object (dict) or a raw string: the
    JSON text for function tools, or the freeform input for custom tools. ``id`` defaults to a
    deterministic id derived from the request."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @classmethod
    def from_obj(cls, obj: Any) -> ToolCall:
        if isinstance(obj, ToolCall):
            return obj
        if not isinstance(obj, Mapping) or "name" not in obj:
            raise ScenarioError(f"scenario: a tool call needs at least `name`, got {obj!r}")
        _check_keys(obj, ("name", "arguments", "id"), "tool_calls[]")
        args = obj.get("arguments", {})
        if not isinstance(args, Mapping | str):
            raise ScenarioError(f"scenario: tool call `arguments` must be a mapping or string, got {args!r}")
        return cls(name=str(obj["name"]), arguments=args, id=obj.get("id"))


@dataclass(frozen=True, kw_only=True, slots=True)
class ShellCommand:
    """A shell command, mapped to whichever shell tool the request offers: Codex's
    ``exec_command {cmd}``, Claude Code's ``Bash {command}``, else ``shell_command``, ``bash``,
    ``shell`` ... (see ``render.resolve_shell``). ``tool``/``arg`` force a tool and argument."""

    command: str
    tool: str | None = None
    arg: str | None = None

    @classmethod
    def from_obj(cls, obj: Any) -> ShellCommand:
        if isinstance(obj, ShellCommand):
            return obj
        if isinstance(obj, str):
            return cls(command=obj)
        if isinstance(obj, Mapping) and isinstance(obj.get("command"), str):
            _check_keys(obj, ("command", "tool", "arg"), "shell")
            return cls(command=obj["command"], tool=obj.get("tool"), arg=obj.get("arg"))
        raise ScenarioError(f"scenario: `shell` must be a string or {{command, tool?, arg?}}, got {obj!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class ErrorReply:
    """An HTTP error instead of a completion.

    Attributes:
        status: HTTP status (429, 500, 529 ...).
        message: error message; defaults to a text naming the status.
        type: provider error type; defaults by status (``rate_limit_error`` ...).
        code: OpenAI ``error.code`` (e.g. ``rate_limit_exceeded``).
        body: a raw body (mapping → JSON, str → as is) replacing the provider error shape.
        times: fail only the first N requests that reach this reply, then fall through to the
            next reply (a per-rule counter, the server's only state). None = always fail.
        retry_after_s: sends ``retry-after`` and ``retry-after-ms`` so SDK retries are quick.
        headers: extra response headers (``x-should-retry`` ...).
    """

    status: int = 500
    message: str | None = None
    type: str | None = None
    code: str | None = None
    body: Mapping[str, Any] | str | None = None
    times: int | None = None
    retry_after_s: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 400 <= int(self.status) <= 599:
            raise ScenarioError(f"scenario: error.status must be 4xx/5xx, got {self.status}")
        if self.times is not None and self.times < 1:
            raise ScenarioError(f"scenario: error.times must be >= 1, got {self.times}")

    @classmethod
    def from_obj(cls, obj: Any) -> ErrorReply:
        if isinstance(obj, ErrorReply):
            return obj
        if isinstance(obj, int):
            return cls(status=obj)
        if not isinstance(obj, Mapping):
            raise ScenarioError(f"scenario: `error` must be a status or a mapping, got {obj!r}")
        _check_keys(
            obj, ("status", "message", "type", "code", "body", "times", "retry_after_s", "headers"), "error"
        )
        return cls(**{k: v for k, v in obj.items() if v is not None})


@dataclass(frozen=True, kw_only=True, slots=True)
class UsageOverride:
    """Token counts to report instead of the estimate. A field left None keeps the estimate."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def from_obj(cls, obj: Any) -> UsageOverride:
        if isinstance(obj, UsageOverride):
            return obj
        if not isinstance(obj, Mapping):
            raise ScenarioError(f"scenario: `usage` must be a mapping, got {obj!r}")
        _check_keys(obj, ("prompt_tokens", "completion_tokens", "input_tokens", "output_tokens"), "usage")
        return cls(
            prompt_tokens=obj.get("prompt_tokens", obj.get("input_tokens")),
            completion_tokens=obj.get("completion_tokens", obj.get("output_tokens")),
        )


_REPLY_KEYS = (
    "text",
    "tool_calls",
    "shell",
    "apply_patch",
    "error",
    "delay_s",
    "usage",
    "stop_reason",
    "sse_mode",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptedReply:
    """One scripted model answer.

    Attributes:
        text: assistant text (templated). With tool calls it comes first.
        tool_calls: tool calls to make (arguments' strings are templated).
        shell: a shell command for the offered shell tool (comes after ``tool_calls``).
        apply_patch: a patch for the offered ``apply_patch`` tool: a ``custom_tool_call`` when
            the tool is freeform (Codex), else a function call with ``{"input": patch}``.
        error: answer with an HTTP error instead (see :class:`ErrorReply`).
        delay_s: wait this long before answering (timeout tests); ``stop()`` cuts it short.
        usage: token counts to report instead of the estimate.
        stop_reason: override ``finish_reason`` (chat) / ``stop_reason`` (messages); for
            responses any value gives ``status: incomplete`` with that reason.
        sse_mode: Responses SSE shape: ``full`` (every OpenAI event), ``minimal`` (exactly the
            sequence verified with Codex: created, output_item.added, [output_text.delta],
            output_item.done, completed) or ``nocomplete`` (full without response.completed).
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    shell: ShellCommand | None = None
    apply_patch: str | None = None
    error: ErrorReply | None = None
    delay_s: float = 0.0
    usage: UsageOverride | None = None
    stop_reason: str | None = None
    sse_mode: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tool_calls", tuple(ToolCall.from_obj(c) for c in self.tool_calls))
        if self.shell is not None:
            object.__setattr__(self, "shell", ShellCommand.from_obj(self.shell))
        if self.error is not None:
            object.__setattr__(self, "error", ErrorReply.from_obj(self.error))
        if self.usage is not None:
            object.__setattr__(self, "usage", UsageOverride.from_obj(self.usage))
        if self.sse_mode is not None and self.sse_mode not in SSE_MODES:
            raise ScenarioError(f"scenario: sse_mode {self.sse_mode!r} unknown; allowed: {list(SSE_MODES)}")
        if self.delay_s < 0:
            raise ScenarioError(f"scenario: delay_s must be >= 0, got {self.delay_s}")
        if (
            self.text is None
            and not self.tool_calls
            and self.shell is None
            and self.apply_patch is None
            and self.error is None
        ):
            raise ScenarioError("scenario: a reply needs text, tool_calls, shell, apply_patch or error")

    @classmethod
    def from_obj(cls, obj: Any) -> ScriptedReply:
        """Build from the file form; a bare string is a text reply."""
        if isinstance(obj, ScriptedReply):
            return obj
        if isinstance(obj, str):
            return cls(text=obj)
        if not isinstance(obj, Mapping):
            raise ScenarioError(f"scenario: a reply must be a mapping or a string, got {obj!r}")
        _check_keys(obj, _REPLY_KEYS, "reply")
        kwargs = dict(obj)
        if "tool_calls" in kwargs:
            calls = kwargs["tool_calls"]
            if not isinstance(calls, Sequence) or isinstance(calls, str):
                raise ScenarioError(f"scenario: `tool_calls` must be a list, got {calls!r}")
            kwargs["tool_calls"] = tuple(calls)
        if "delay_s" in kwargs:
            kwargs["delay_s"] = float(kwargs["delay_s"])
        return cls(**kwargs)

    @property
    def is_transient_error(self) -> bool:
        """A ``times``-limited error: it sits in front of the next reply's turn slot."""
        return self.error is not None and self.error.times is not None


class ErrorCounters:
    """Per-(rule, reply) counts of transient errors already served. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, int], int] = {}

    def take(self, key: tuple[str, int], times: int) -> bool:
        """Count one use of ``key`` if fewer than ``times`` were served; say whether it was."""
        with self._lock:
            n = self._counts.get(key, 0)
            if n >= times:
                return False
            self._counts[key] = n + 1
            return True

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """A named match plus the replies it gives, by turn index (see the module docstring)."""

    name: str
    match: Match = field(default_factory=Match)
    replies: tuple[ScriptedReply, ...] = ()
    _slots: tuple[tuple[int, ...], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.match, Mapping):
            object.__setattr__(self, "match", Match.from_obj(self.match))
        replies = tuple(ScriptedReply.from_obj(r) for r in self.replies)
        object.__setattr__(self, "replies", replies)
        if not replies:
            raise ScenarioError(f"scenario: rule {self.name!r} has no replies")
        # Group reply indexes into turn slots: transient errors, then the reply they guard.
        slots: list[tuple[int, ...]] = []
        pending: list[int] = []
        for i, r in enumerate(replies):
            pending.append(i)
            if not r.is_transient_error:
                slots.append(tuple(pending))
                pending = []
        if pending:
            raise ScenarioError(
                f"scenario: rule {self.name!r} ends with an error that has `times`; "
                "add the reply it falls through to"
            )
        object.__setattr__(self, "_slots", tuple(slots))

    @classmethod
    def from_obj(cls, obj: Any, index: int) -> Rule:
        if isinstance(obj, Rule):
            return obj
        if not isinstance(obj, Mapping):
            raise ScenarioError(f"scenario: rule #{index} must be a mapping, got {obj!r}")
        _check_keys(obj, ("name", "match", "replies", "reply"), f"rule #{index}")
        if ("replies" in obj) == ("reply" in obj):
            raise ScenarioError(f"scenario: rule #{index} needs exactly one of `replies` or `reply`")
        replies = obj["replies"] if "replies" in obj else [obj["reply"]]
        if not isinstance(replies, Sequence) or isinstance(replies, str):
            raise ScenarioError(f"scenario: rule #{index} `replies` must be a list")
        return cls(
            name=str(obj.get("name") or f"rule{index}"),
            match=Match.from_obj(obj.get("match")),
            replies=tuple(replies),
        )

    @property
    def slot_count(self) -> int:
        """How many turn slots the rule has (replies minus the transient errors)."""
        return len(self._slots)

    def choose(self, turn: int, counters: ErrorCounters) -> tuple[int, ScriptedReply]:
        """The reply (and its index in ``replies``) for a request at ``turn``."""
        slot = self._slots[min(max(turn, 0), len(self._slots) - 1)]
        for i in slot[:-1]:
            err = self.replies[i].error
            assert err is not None and err.times is not None
            if counters.take((self.name, i), err.times):
                return i, self.replies[i]
        return slot[-1], self.replies[slot[-1]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    """Ordered rules, an optional ``default`` rule, and server-wide settings.

    Attributes:
        rules: tried in order; the first whose match fits answers.
        default: answers when no rule (and no responder) does; its match is ignored.
        name: for logs.
        models: extra ids listed by ``GET /v1/models``.
        responses_sse: default Responses SSE mode (``full``, ``minimal``, ``nocomplete``).
    """

    rules: tuple[Rule, ...] = ()
    default: Rule | None = None
    name: str = "scenario"
    models: tuple[str, ...] = ()
    responses_sse: str = "full"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rules", tuple(Rule.from_obj(r, i) for i, r in enumerate(self.rules)))
        if isinstance(self.default, Mapping):
            object.__setattr__(self, "default", Rule.from_obj({"name": "default", **self.default}, -1))
        object.__setattr__(self, "models", _strs(self.models, "models"))
        names = [r.name for r in self.rules] + ([self.default.name] if self.default is not None else [])
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            # Names key the error counters and the request log, so they must be unique.
            raise ScenarioError(f"scenario: duplicate rule names {dupes}")
        if self.responses_sse not in SSE_MODES:
            raise ScenarioError(
                f"scenario: responses_sse {self.responses_sse!r} unknown; allowed: {list(SSE_MODES)}"
            )

    @classmethod
    def from_obj(cls, obj: Any) -> Scenario:
        """Build from the file form: a list of rules or a mapping with ``rules`` and friends."""
        if isinstance(obj, Scenario):
            return obj
        if obj is None:
            return cls()
        if isinstance(obj, Sequence) and not isinstance(obj, str):
            return cls(rules=tuple(obj))
        if not isinstance(obj, Mapping):
            raise ScenarioError(f"scenario: expected a list of rules or a mapping, got {type(obj).__name__}")
        _check_keys(obj, ("name", "rules", "default", "models", "responses_sse"), "scenario")
        rules = obj.get("rules") or ()
        if not isinstance(rules, Sequence) or isinstance(rules, str):
            raise ScenarioError("scenario: `rules` must be a list")
        default = obj.get("default")
        if default is not None and not isinstance(default, Mapping | Rule):
            raise ScenarioError("scenario: `default` must be a rule mapping ({replies: [...]})")
        if isinstance(default, Mapping):
            _check_keys(default, ("name", "replies", "reply", "match"), "default")
        return cls(
            rules=tuple(rules),
            default=Rule.from_obj({"name": "default", **default}, -1)
            if isinstance(default, Mapping)
            else default,
            name=str(obj.get("name") or "scenario"),
            models=obj.get("models") or (),
            responses_sse=str(obj.get("responses_sse") or "full"),
        )

    @classmethod
    def loads(cls, text: str, *, fmt: str = "yaml") -> Scenario:
        """Parse YAML (a superset of JSON) or JSON text."""
        if fmt == "json":
            data = json.loads(text)
        else:
            import yaml  # only scenario files need it

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ScenarioError(f"scenario: invalid YAML: {exc}") from exc
        return cls.from_obj(data)

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read a ``.yaml``/``.yml``/``.json`` scenario file."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ScenarioError(f"scenario: cannot read {p}: {exc}") from exc
        return cls.loads(text, fmt="json" if p.suffix.lower() == ".json" else "yaml")

    @classmethod
    def coerce(cls, obj: ScenarioLike) -> Scenario:
        """Accept a Scenario, a file path, a list of rules or a mapping (None = no rules)."""
        if isinstance(obj, str | Path):
            return cls.load(obj)
        return cls.from_obj(obj)

    def find(self, req: ScriptedRequest) -> tuple[Rule, dict[str, str]] | None:
        """The first rule that fits ``req`` and its template variables, else None."""
        for rule in self.rules:
            variables = rule.match.test(req)
            if variables is not None:
                return rule, variables
        return None


ScenarioLike = Scenario | Mapping[str, Any] | Sequence[Any] | str | Path | None

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z0-9_]+)\s*\}\}")


def render_template(value: Any, variables: Mapping[str, str]) -> Any:
    """Replace ``{{name}}`` in strings (recursively in lists and mappings).

    Variables: ``turn``, ``model``, ``api``, ``rule``, and from a ``regex`` match ``match``
    (the whole match), ``1``..``n`` (groups) and named groups. Unknown names are left as is.
    """
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: variables.get(m.group(1), m.group(0)), value)
    if isinstance(value, Mapping):
        return {k: render_template(v, variables) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render_template(v, variables) for v in value]
    return value
