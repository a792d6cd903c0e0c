"""The sleep env: tasks ``skillopt sleep mine`` mined from the user's own agent sessions, each
checked by a reference (a command that must succeed, tests that must pass, a file's content, or
an accepted answer). See ``docs/sleep.md`` and :mod:`skillopt.envs.sleep.items` for the schema."""

from __future__ import annotations

__all__: list[str] = []
