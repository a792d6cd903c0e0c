"""``skillopt score --env textworld``: grade an action list on a game, the way a rollout is
graded: the game is generated from its seed (the trusted side's own copy) and the actions are
replayed against it in a fresh container of the TextWorld image on the local Docker engine.

Usage::

    with local_grading_sandboxes(spec=replace(ContainerSpec(), image=IMAGE)) as fresh:
        score_actions({"challenge": "tw-coin_collector", "level": 1, "seed": 101},
                      "go east\\ntake coin", fresh)
        # {"env": "textworld", "id": "tw-coin_collector-l1-s101", "hard": 1.0, "won": true, ...}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from skillopt.agents.sandbox import Sandbox
from skillopt.envs.textworld.agents import clean_action, replay_actions
from skillopt.envs.textworld.data import game_item
from skillopt.envs.textworld.games import GameSpec, ensure_game
from skillopt.envs.textworld.spec import TextWorldOptions
from skillopt.errors import ConfigError, InvalidRequest

__all__ = ["parse_actions", "score_actions"]

MAX_ACTIONS = 1000


def parse_actions(response: str) -> list[str]:
    """The actions of a response: a JSON list of strings, else one action per non-empty line
    (each cleaned as the agent cleans the model's action).

    Raises:
        InvalidRequest: no action, too many, or a JSON list holding something else.
    """
    text = response.strip()
    if text.startswith("["):
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"the actions look like a JSON list but are not valid JSON: {exc}") from None
        if not isinstance(raw, list) or not all(isinstance(a, str) for a in raw):
            raise InvalidRequest("a JSON action list must hold strings only")
        lines = raw
    else:
        lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise InvalidRequest("no action given (one per line, or a JSON list of strings)")
    if len(lines) > MAX_ACTIONS:
        raise InvalidRequest(f"{len(lines)} actions; at most {MAX_ACTIONS}")
    return [clean_action(a) for a in lines]


def score_actions(
    raw: Mapping[str, Any],
    response: str,
    fresh: Callable[[], AbstractContextManager[Sandbox]],
    *,
    timeout_s: float = 120.0,
) -> dict[str, Any]:
    """Replay the actions of ``response`` on the game ``raw`` names (``challenge``, ``level``,
    ``seed``, as in the env's ``games.json``) and grade the outcome like a rollout.

    Raises:
        InvalidRequest: a malformed game spec or action list.
        ConfigError: textworld is missing here or cannot generate the game.
        GameEngineError: the replay failed.
    """
    try:
        spec = GameSpec(
            challenge=str(raw["challenge"]),
            level=int(raw["level"]),
            seed=int(raw["seed"]),
            split=str(raw.get("split", "test")),
        )
    except KeyError as exc:
        raise InvalidRequest(
            f"textworld: the game needs challenge, level and seed; {exc.args[0]!r} is missing"
        ) from None
    except (TypeError, ValueError, ConfigError) as exc:
        raise InvalidRequest(f"textworld: not a game of this env: {exc}") from None
    actions = parse_actions(response)
    item = game_item(ensure_game(spec), TextWorldOptions())
    state = replay_actions(fresh, item.task.cases[0].files, actions, timeout_s=timeout_s)
    max_score = int(item.grading.attributes["max_score"]) or state.max_score or 1
    score = max(0, min(state.score, max_score))
    won = bool(state.won)
    reason = "" if won else f"not won: score {score}/{max_score} after {len(actions)} actions"
    return {
        "env": "textworld",
        "id": item.id,
        "task_type": item.task_type,
        "hard": 1.0 if won else 0.0,
        "soft": 1.0 if won else score / max_score,
        "won": won,
        "lost": bool(state.lost),
        "score": score,
        "max_score": max_score,
        "actions": len(actions),
        "moves": state.moves,
        "fail_reason": reason,
        "answer": " | ".join(actions),
        "predicted_answer": " | ".join(actions),
    }
