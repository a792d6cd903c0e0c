"""The TextWorld environment as the sandbox service runs it."""

from __future__ import annotations

from skillopt.envs.base import ComposedEnv
from skillopt.envs.textworld.agents import MAX_ACTION_CHARS, GameAgent
from skillopt.envs.textworld.spec import SPEC
from skillopt.errors import InvalidRequest
from skillopt.types import RolloutRequest

__all__ = ["TextWorldEnv"]

_GAME_FILES = ["game.json", "game.z8"]
_MAX_GAME_BYTES = 8 * 1024 * 1024


class TextWorldEnv(ComposedEnv):
    """One TextWorld game per rollout, played in the rollout's container (see :mod:`.agents`)."""

    spec = SPEC

    def build_agents(self):
        return {"play": GameAgent()}

    def check_request(self, request: RolloutRequest) -> None:
        task, grading = request.task, request.grading
        if len(task.cases) != 1 or task.cases[0].name != "game":
            raise InvalidRequest("textworld: the task must hold exactly one case 'game' with the game files")
        files = {f.name: f.content for f in task.cases[0].files}
        if sorted(files) != _GAME_FILES:
            raise InvalidRequest(
                f"textworld: case 'game' must hold exactly {_GAME_FILES}, got {sorted(files)}"
            )
        z8 = files["game.z8"]
        if not z8 or z8[0] != 8 or len(z8) > _MAX_GAME_BYTES:
            raise InvalidRequest(
                "textworld: game.z8 is not a Z-machine version 8 story file (or is too large)"
            )
        if not files["game.json"].lstrip().startswith(b"{") or len(files["game.json"]) > _MAX_GAME_BYTES:
            raise InvalidRequest("textworld: game.json is not a TextWorld game description")
        if grading.cases:
            raise InvalidRequest("textworld: grading holds no files (the game's own state decides)")
        max_score = grading.attributes.get("max_score")
        if not isinstance(max_score, int) or isinstance(max_score, bool) or max_score < 1:
            raise InvalidRequest(
                f"textworld: grading.attributes.max_score must be a positive integer, got {max_score!r}"
            )
        walkthrough = grading.attributes.get("walkthrough", [])
        if not isinstance(walkthrough, list) or not all(isinstance(a, str) for a in walkthrough):
            raise InvalidRequest("textworld: grading.attributes.walkthrough must be a list of strings")
        for key in ("history_length", "step_timeout_s"):
            value = task.attributes.get(key)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool) or value < 0
            ):
                raise InvalidRequest(
                    f"textworld: task.attributes.{key} must be a non-negative number, got {value!r}"
                )
        if any(len(a) > MAX_ACTION_CHARS * 4 for a in walkthrough):
            raise InvalidRequest("textworld: a walkthrough action is too long")
