"""Fixtures for the reflection unit tests.

The optimizer is a tiny in-process :class:`ChatModel` (scripted replies or a function of the
request) wrapped in a real :class:`RoleModel`. These tests exercise our own prompt building and
answer parsing; the end-to-end tests elsewhere drive the real HTTP scripted server.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from skillopt.models.base import ChatRequest, ChatResponse
from skillopt.models.roles import RoleModel, UsageTracker
from skillopt.types import (
    CaseResult,
    ExecRecord,
    InfraErrorKind,
    InfraFailure,
    Message,
    ModelSpec,
    RolloutResult,
    Trace,
    Usage,
)

Reply = str | Exception | Callable[[ChatRequest], "str | Exception"]


class FakeChat:
    """A scripted ChatModel: each call pops the next reply (or calls ``fn(request)``).

    A reply that is an exception is raised. Requests are recorded (thread-safe).
    """

    name = "fake"

    def __init__(self, replies: Sequence[Reply] | Callable[[ChatRequest], Any] = ()) -> None:
        self._fn = replies if callable(replies) else None
        self._replies = [] if callable(replies) else list(replies)
        self._lock = threading.Lock()
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ChatResponse:
        with self._lock:
            self.requests.append(request)
            if self._fn is not None:
                reply: Any = self._fn(request)
            elif self._replies:
                reply = self._replies.pop(0)
            else:
                raise AssertionError("FakeChat: no scripted reply left")
        if callable(reply) and not isinstance(reply, Exception):
            reply = reply(request)
        if isinstance(reply, Exception):
            raise reply
        return ChatResponse(text=reply, usage=Usage(calls=1, prompt_tokens=10, completion_tokens=5))

    @property
    def calls(self) -> int:
        return len(self.requests)

    def system(self, i: int = -1) -> str:
        return self.requests[i].messages[0].content

    def user(self, i: int = -1) -> str:
        return self.requests[i].messages[1].content


def role(chat: FakeChat) -> RoleModel:
    return RoleModel(chat, ModelSpec(provider="fake", model="optimizer"), UsageTracker(), retries=0)


@pytest.fixture
def fake():
    """``fake(replies) -> (chat, role_model)``."""

    def make(replies: Sequence[Reply] | Callable[[ChatRequest], Any] = ()) -> tuple[FakeChat, RoleModel]:
        chat = FakeChat(replies)
        return chat, role(chat)

    return make


def make_row(
    id: str,
    hard: float = 0.0,
    *,
    soft: float | None = None,
    fail_reason: str = "",
    infra: bool = False,
    messages: Sequence[Message] = (),
    executions: Sequence[ExecRecord] = (),
    system_prompt: str = "",
    user_prompt: str = "",
    notes: dict[str, str] | None = None,
    cases: Sequence[CaseResult] = (),
    n_turns: int = 1,
) -> RolloutResult:
    if not fail_reason and hard < 1e-9 and not infra:
        fail_reason = "eval-mismatch: wrong value"
    return RolloutResult(
        id=id,
        rollout_id=f"r-{id}",
        hard=hard,
        soft=hard if soft is None else soft,
        fail_reason=fail_reason,
        n_turns=n_turns,
        cases=tuple(cases),
        trace=Trace(
            messages=tuple(messages) or (Message(role="assistant", content=f"answer for {id}"),),
            executions=tuple(executions),
            system_prompt=system_prompt,
            user_prompt=user_prompt,
            notes=notes or {},
        ),
        infra_error=InfraFailure(kind=InfraErrorKind.OOM_KILLED, message="oom") if infra else None,
    )


@pytest.fixture
def row():
    return make_row
