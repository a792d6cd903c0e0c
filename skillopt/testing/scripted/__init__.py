"""A scripted model server for tests and the offline demo (DESIGN.md §5).

A real HTTP server that speaks the OpenAI Chat Completions and Responses APIs and the Anthropic
Messages API, streaming and not, so that the official SDKs, Codex CLI and Claude Code run
against it unchanged. Scenarios (rules + replies, see :mod:`.scenario`) and programmatic
responders decide the answers; every request is recorded for assertions.

Turn index (which reply of a rule answers), per API, all stateless:

- ``chat``: runs of consecutive ``assistant`` messages in ``messages``.
- ``responses``: runs of consecutive model-output items in ``input`` (assistant messages,
  ``function_call``, ``custom_tool_call``, other ``*_call`` items, ``reasoning``).
- ``messages``: runs of consecutive ``assistant`` messages in ``messages``.

In each case that is the number of model turns already in the conversation, so a client retry
of the same request gets the same reply.
"""

from skillopt.testing.scripted.request import OfferedTool, ScriptedMessage, ScriptedRequest
from skillopt.testing.scripted.scenario import (
    ErrorReply,
    Match,
    Rule,
    Scenario,
    ScenarioError,
    ScenarioLike,
    ScriptedReply,
    ShellCommand,
    ToolCall,
    UsageOverride,
)
from skillopt.testing.scripted.server import RecordedRequest, Responder, ScriptedModelServer, redact_headers

__all__ = [
    "ErrorReply",
    "Match",
    "OfferedTool",
    "RecordedRequest",
    "Responder",
    "Rule",
    "Scenario",
    "ScenarioError",
    "ScenarioLike",
    "ScriptedMessage",
    "ScriptedModelServer",
    "ScriptedReply",
    "ScriptedRequest",
    "ShellCommand",
    "ToolCall",
    "UsageOverride",
    "redact_headers",
]
