"""HumanEval: Python function completion from signature + docstring; hidden unit tests (pass@1).

Modules: :mod:`.spec`, :mod:`.env`, :mod:`.data`; the shared code lives in
:mod:`skillopt.envs._code` (items, test plans, trusted grading in fresh containers, agents).
"""

from __future__ import annotations

__all__: list[str] = []
