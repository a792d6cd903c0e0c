"""OpenAI Chat Completions through the official ``openai`` SDK.

Covers OpenAI itself and every OpenAI-compatible server (vLLM, llama.cpp, Ollama, our scripted
model server). Retries on 429/5xx/timeouts are the SDK's own (``max_retries``, exponential
backoff with jitter); this module maps what is left to :mod:`skillopt.errors`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from skillopt.errors import ModelError, ModelTimeout, RateLimited
from skillopt.models.base import ChatRequest, ChatResponse
from skillopt.types import Message, Usage

__all__ = ["OpenAIChatModel", "to_openai_messages"]


def to_openai_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """Provider-neutral messages → Chat Completions ``messages``."""
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.role == "assistant" and m.tool_calls:
            item["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {
                        "name": c["name"],
                        "arguments": c["arguments"]
                        if isinstance(c["arguments"], str)
                        else json.dumps(c["arguments"]),
                    },
                }
                for c in m.tool_calls
            ]
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
        if m.name and m.role != "tool":
            item["name"] = m.name
        out.append(item)
    return out


class OpenAIChatModel:
    """A configured Chat Completions endpoint.

    Args:
        name: profile name (for logs and errors).
        base_url: endpoint root ending in ``/v1``; ``None`` = api.openai.com.
        api_key: the key; never logged.
        max_retries: SDK retries on 429/5xx/connection errors/timeouts.
        timeout_s: default per-call timeout.
        token_param: ``max_completion_tokens`` (OpenAI) or ``max_tokens`` (most compatible servers).
        default_extra: extra body fields sent on every call (e.g. vLLM ``chat_template_kwargs``).
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None,
        api_key: str,
        max_retries: int = 4,
        timeout_s: float = 120.0,
        token_param: str = "max_completion_tokens",
        default_extra: Mapping[str, Any] | None = None,
        client: Any = None,
    ) -> None:
        import openai  # lazily: the package loads without provider SDKs

        self.name = name
        self.token_param = token_param
        self.default_extra = dict(default_extra or {})
        self._client = client or openai.OpenAI(
            base_url=base_url, api_key=api_key or "unused", max_retries=max_retries, timeout=timeout_s
        )

    def complete(self, request: ChatRequest) -> ChatResponse:
        import openai

        kwargs: dict[str, Any] = {"model": request.model, "messages": to_openai_messages(request.messages)}
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_output_tokens:
            kwargs[self.token_param] = request.max_output_tokens
        if request.reasoning_effort and not request.tools:
            kwargs["reasoning_effort"] = request.reasoning_effort
        extra = {**self.default_extra, **dict(request.extra)}
        if extra:
            kwargs["extra_body"] = extra
        if request.timeout_s is not None:
            kwargs["timeout"] = max(1.0, request.timeout_s)
        # Which stage asked (rollout, analyst, merge...): for gateways, recordings and scripted
        # servers; providers ignore unknown headers.
        kwargs["extra_headers"] = {"X-Skillopt-Stage": request.stage}
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except openai.RateLimitError as exc:
            raise RateLimited(f"{self.name}: rate limited after retries: {exc.message}") from exc
        except openai.APITimeoutError as exc:
            raise ModelTimeout(f"{self.name}: no answer within the timeout") from exc
        except openai.AuthenticationError as exc:
            raise ModelError(
                f"{self.name}: the provider rejected the key ({exc.status_code}); check the key configured for this provider"
            ) from exc
        except openai.APIStatusError as exc:
            raise ModelError(f"{self.name}: HTTP {exc.status_code}: {exc.message}") from exc
        except openai.APIConnectionError as exc:
            raise ModelError(f"{self.name}: cannot connect to the model endpoint: {exc}") from exc
        if not resp.choices:
            raise ModelError(f"{self.name}: the response had no choices")
        choice = resp.choices[0]
        msg = choice.message
        calls = tuple(
            {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
            for c in (msg.tool_calls or ())
            if getattr(c, "function", None) is not None
        )
        usage = Usage(
            calls=1,
            prompt_tokens=getattr(resp.usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(resp.usage, "completion_tokens", 0) or 0,
        )
        return ChatResponse(
            text=msg.content or "",
            tool_calls=calls,
            usage=usage,
            finish_reason=choice.finish_reason or "",
            raw_model=resp.model or "",
        )
