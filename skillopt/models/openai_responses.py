"""Kind ``openai_responses``: an OpenAI-family endpoint that always speaks the Responses API
(the translation is :mod:`skillopt.models.responses_wire`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillopt.models.openai_chat import OpenAIChatModel

__all__ = ["OpenAIResponsesModel"]


class OpenAIResponsesModel(OpenAIChatModel):
    """A configured endpoint that always uses the Responses API.

    Args: as :class:`OpenAIChatModel` (without ``token_param``, ``api`` and ``thinking``).
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None,
        api_key: str,
        max_retries: int = 4,
        timeout_s: float = 120.0,
        default_extra: Mapping[str, Any] | None = None,
        client: Any = None,
        key_hint: str = "",
    ) -> None:
        super().__init__(
            name,
            base_url=base_url,
            api_key=api_key,
            max_retries=max_retries,
            timeout_s=timeout_s,
            default_extra=default_extra,
            client=client,
            api="responses",
            key_hint=key_hint,
        )
