"""What OfficeQA declares: agents, options, where its two sides live."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "OfficeQAOptions", "officeqa_root_problem"]


class OfficeQAOptions(EnvOptions):
    """``env.options`` of OfficeQA."""

    oracle_pages: bool = True
    """Render the pages each question cites into the prompt (upstream's default offline mode);
    off = the agent finds them with its tools alone."""
    max_tool_turns: int = Field(default=24, ge=1, le=200)
    """Model calls of the ``tools`` agent per question (each may make several tool calls)."""
    grading: Literal["normalized", "numeric"] = "normalized"
    """``hard`` = exact match after SkillOpt's normalisation (``normalized``), or upstream
    ``reward.py``'s numeric match (``numeric``, with ``numeric_tolerance``); ``soft`` is the
    token F1 either way, and every row reports ``em``, ``f1`` and ``numeric``."""
    numeric_tolerance: float = Field(default=0.0, ge=0.0, le=1.0)
    """Relative tolerance of the numeric match (0.01 = 1 %)."""
    page_chars: int = Field(default=24_000, ge=1_000, le=200_000)
    """Characters of one cited page in the prompt (longer pages are cut)."""
    total_page_chars: int = Field(default=80_000, ge=1_000, le=1_000_000)
    """Characters of all cited pages in the prompt."""


def officeqa_root_problem(root: Path, split_mode: str) -> str:
    """``""`` when ``root`` is laid out like ``../shared/datasets/officeqa``, else what to fix."""
    missing = [name for name in ("questions.jsonl", "corpus") if not (root / name).exists()]
    if missing:
        return (
            f"{root} is not an OfficeQA data root: it lacks {', '.join(missing)} (a root holds "
            "questions.jsonl, splits.json and corpus/<bulletin>.txt, like ../shared/datasets/officeqa)"
        )
    return ""


SPEC = EnvSpec(
    name="officeqa",
    summary="questions about U.S. Treasury Bulletins answered from a document corpus; EM / token F1 or numeric",
    agents=(
        AgentSpec(
            name="tools",
            sandbox="isolated",
            summary="the model calls glob/read/grep; they run in the rollout container over the corpus",
        ),
        AgentSpec(
            name="qa", sandbox="none", summary="answer from the prompt (the cited pages); no container"
        ),
        AgentSpec(
            name="codex_exec",
            sandbox="gateway",
            api="openai",
            summary="Codex CLI in a container, the corpus under docs/, the question in task.md",
        ),
        AgentSpec(
            name="claude_code_exec",
            sandbox="gateway",
            api="anthropic",
            summary="Claude Code in a container, the corpus under docs/, the question in task.md",
        ),
    ),
    default_agent="tools",
    environment="skillopt.envs.officeqa.env:OfficeQAEnv",
    data="skillopt.envs.officeqa.data:OfficeQAData",
    options=OfficeQAOptions,
    raw_item="skillopt.envs.officeqa.items:item_from_raw",
    data_root_problem=officeqa_root_problem,
)
