"""Env-independent agents: the building blocks an env composes with its prompts and grading.

| module | agent | sandbox |
|---|---|---|
| :mod:`.codegen` | :class:`~.codegen.CodegenAgent`: one program, single- or multi-turn | isolated container |
| :mod:`.react` | :class:`~.react.ReactAgent`: ``bash`` + ``write_file`` tools | isolated container |
| :mod:`.exec_cli` | :class:`~.exec_cli.ExecAgent`: Codex CLI / Claude Code in the container | gateway network |
| :mod:`.qa` | :class:`~.qa.QAAgent`: answer a question (runs no code); :class:`~.qa.QAExecTask` | none / gateway |

:mod:`.context` holds :class:`~.context.AgentContext` and the :class:`~.context.Agent`
protocol; :mod:`.common` the bookkeeping every agent shares. Nothing here knows any benchmark:
an env supplies a small task object per rollout (its prompts, how its program runs, how its
answer is graded), see ``skillopt/envs/README.md``.
"""

from __future__ import annotations

__all__: list[str] = []
