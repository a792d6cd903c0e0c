"""MBPP as the sandbox service runs it (see :mod:`skillopt.envs._code.env`)."""

from __future__ import annotations

from pathlib import Path

from skillopt.envs._code.env import CodeEnv
from skillopt.envs.mbpp.spec import SPEC

__all__ = ["MBPPEnv"]


class MBPPEnv(CodeEnv):
    """Python functions from a one-line problem statement (sanitized); hidden assert tests (pass@1)."""

    spec = SPEC
    prompts_dir = Path(__file__).parent / "prompts"
