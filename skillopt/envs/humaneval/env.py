"""HumanEval as the sandbox service runs it (see :mod:`skillopt.envs._code.env`)."""

from __future__ import annotations

from pathlib import Path

from skillopt.envs._code.env import CodeEnv
from skillopt.envs.humaneval.spec import SPEC

__all__ = ["HumanEvalEnv"]


class HumanEvalEnv(CodeEnv):
    """Python function completion from signature + docstring; hidden unit tests (pass@1)."""

    spec = SPEC
    prompts_dir = Path(__file__).parent / "prompts"
