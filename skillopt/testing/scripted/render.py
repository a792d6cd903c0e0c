"""API-neutral reply resolution: templates, shell/apply_patch mapping, ids, tokens, errors.

A :class:`ScriptedReply` is resolved against the request into a :class:`ResolvedReply` (final
text, concrete tool calls with JSON argument strings, token counts, ids). The API modules only
format a ResolvedReply; they make no decisions.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from skillopt.testing.scripted.request import OfferedTool, ScriptedRequest
from skillopt.testing.scripted.scenario import ScenarioError, ScriptedReply, ShellCommand, render_template

__all__ = [
    "CHUNK_CHARS",
    "CREATED",
    "ResolvedCall",
    "ResolvedReply",
    "error_body",
    "error_type",
    "estimate_tokens",
    "make_id",
    "pieces",
    "resolve",
    "resolve_shell",
    "sse_frame",
]

# Streamed text and arguments are cut into pieces of this many characters, so clients really
# have to accumulate deltas (one delta would hide accumulation bugs).
CHUNK_CHARS = 16

# A fixed creation timestamp: replies are a pure function of the request (replay tests diff them).
CREATED = 1_700_000_000

# Preference order when a reply says `shell` and the request offers several shell tools.
_SHELL_TOOLS = (
    "exec_command",  # Codex CLI
    "Bash",  # Claude Code
    "shell_command",
    "bash",
    "shell",
    "run_shell",
    "run_command",
    "execute_bash",
    "terminal",
)
_SHELL_ARGS = ("cmd", "command", "script", "code")


def estimate_tokens(text: str) -> int:
    """Deterministic token estimate: ceil(characters / 4)."""
    return math.ceil(len(text) / 4)


def pieces(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """``text`` in consecutive pieces of ``size`` characters (at least one piece)."""
    if not text:
        yield ""
        return
    for i in range(0, len(text), size):
        yield text[i : i + size]


def sse_frame(data: Mapping[str, Any] | str, event: str | None = None) -> bytes:
    """One SSE frame: optional ``event:`` line, a ``data:`` line, a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedCall:
    """A concrete tool call. ``kind`` is ``function`` (``arguments`` is JSON text) or ``custom``
    (``arguments`` is the freeform input, e.g. a patch)."""

    kind: str
    name: str
    arguments: str
    call_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedReply:
    """A reply ready to be formatted. ``text`` None means no text part at all."""

    text: str | None
    calls: tuple[ResolvedCall, ...]
    prompt_tokens: int
    completion_tokens: int
    stop_reason: str | None
    sse_mode: str
    id_seed: str
    model: str
    #: Of ``prompt_tokens``, read from the (simulated) prompt cache and written to it (see
    #: ``prompt_cache``).
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def make_id(self, prefix: str, n: int | str = 0) -> str:
        """A deterministic id ``<prefix><hex>`` unique per request, reply and ``n``."""
        return make_id(self.id_seed, prefix, n)


def make_id(seed: str, prefix: str, n: int | str = 0) -> str:
    """A deterministic id ``<prefix><24 hex>`` derived from ``seed``, ``prefix`` and ``n``."""
    digest = hashlib.sha256(f"{seed}:{prefix}:{n}".encode()).hexdigest()[:24]
    return f"{prefix}{digest}"


def _tool_kind(req: ScriptedRequest, name: str) -> str:
    tool = req.tool(name)
    return "custom" if tool is not None and tool.type == "custom" else "function"


def _arguments_text(arguments: Mapping[str, Any] | str) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(dict(arguments), ensure_ascii=False)


def resolve_shell(req: ScriptedRequest, shell: ShellCommand) -> tuple[str, dict[str, Any]]:
    """Map a shell command to the offered shell tool: ``(tool name, arguments)``.

    The argument name comes from the tool's schema (``cmd``, ``command``, ``script``, ``code``),
    and an array-typed argument gets ``["bash", "-lc", cmd]``. A ``description`` property (Claude
    Code's Bash) is filled too.

    Raises:
        ScenarioError: no shell tool is offered (or the forced one is not).
    """
    tool: OfferedTool | None
    if shell.tool:
        tool = req.tool(shell.tool) or OfferedTool(name=shell.tool)
    else:
        tool = next((t for n in _SHELL_TOOLS for t in req.tools if t.name == n), None)
        if tool is None:
            offered = [t.name for t in req.tools]
            raise ScenarioError(
                f"scripted server: reply uses `shell` but the request offers no shell tool "
                f"(looked for {list(_SHELL_TOOLS)}; offered: {offered}); set shell.tool"
            )
    props = tool.properties
    arg = shell.arg or next((a for a in _SHELL_ARGS if a in props), None)
    if arg is None:
        arg = "cmd" if tool.name == "exec_command" else "command"
    schema = props.get(arg)
    value: Any = shell.command
    if isinstance(schema, Mapping) and schema.get("type") == "array":
        value = ["bash", "-lc", shell.command]
    args: dict[str, Any] = {arg: value}
    if "description" in props and arg != "description":
        args["description"] = "Run shell command"
    return tool.name, args


def resolve(
    reply: ScriptedReply,
    req: ScriptedRequest,
    *,
    variables: Mapping[str, str],
    id_seed: str,
    default_sse_mode: str,
    call_prefix: str = "call_",
) -> ResolvedReply:
    """Turn a non-error scripted reply into concrete text, calls and usage for ``req``.

    Raises:
        ScenarioError: ``shell``/``apply_patch`` cannot be mapped onto the offered tools.
    """
    text = render_template(reply.text, variables) if reply.text is not None else None
    specs: list[tuple[str, str, str | None]] = []  # (name, arguments text, id)
    for call in reply.tool_calls:
        specs.append((call.name, _arguments_text(render_template(call.arguments, variables)), call.id))
    if reply.shell is not None:
        cmd = ShellCommand(
            command=render_template(reply.shell.command, variables),
            tool=reply.shell.tool,
            arg=reply.shell.arg,
        )
        name, args = resolve_shell(req, cmd)
        specs.append((name, json.dumps(args, ensure_ascii=False), None))
    if reply.apply_patch is not None:
        if not req.has_tool("apply_patch"):
            raise ScenarioError(
                "scripted server: reply uses `apply_patch` but the request offers no apply_patch tool "
                f"(offered: {[t.name for t in req.tools]})"
            )
        patch = render_template(reply.apply_patch, variables)
        if _tool_kind(req, "apply_patch") == "custom":
            specs.append(("apply_patch", patch, None))
        else:
            specs.append(("apply_patch", json.dumps({"input": patch}, ensure_ascii=False), None))

    calls = tuple(
        ResolvedCall(
            kind=_tool_kind(req, name),
            name=name,
            arguments=args,
            call_id=cid or make_id(id_seed, call_prefix, i),
        )
        for i, (name, args, cid) in enumerate(specs)
    )
    prompt = estimate_tokens(req.text)
    completion = estimate_tokens((text or "") + "".join(c.arguments for c in calls))
    if reply.usage is not None:
        prompt = reply.usage.prompt_tokens if reply.usage.prompt_tokens is not None else prompt
        completion = (
            reply.usage.completion_tokens if reply.usage.completion_tokens is not None else completion
        )
    return ResolvedReply(
        text=text,
        calls=calls,
        prompt_tokens=prompt,
        completion_tokens=completion,
        stop_reason=reply.stop_reason,
        sse_mode=reply.sse_mode or default_sse_mode,
        id_seed=id_seed,
        model=req.model or "scripted-model",
    )


_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_type(api: str, status: int) -> str:
    """The provider's error ``type`` for an HTTP status."""
    if api == "messages":
        return _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return _OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_body(
    api: str, status: int, message: str, *, type_: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """An error body in the shape the API's SDK parses (OpenAI or Anthropic)."""
    etype = type_ or error_type(api, status)
    if api == "messages":
        return {"type": "error", "error": {"type": etype, "message": message}}
    return {"error": {"message": message, "type": etype, "param": None, "code": code}}
