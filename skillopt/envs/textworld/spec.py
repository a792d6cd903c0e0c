"""What the TextWorld env declares (keep this module cheap: config validation imports it)."""

from __future__ import annotations

from pydantic import Field

from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["IMAGE", "PREIMPORT", "SPEC", "TextWorldOptions"]

#: The rollout image with the game engine (textworld + jericho); built by
#: ``docker/build.sh --only textworld`` from the runtime image.
IMAGE = "skillopt-textworld:latest"
#: Imported once by the container's runner, so each game step forks a warm interpreter: the
#: image's ``skillopt_tw_warm`` imports textworld and parses its knowledge bases' logic
#: (``docker/textworld/skillopt_tw_warm.py``; a game step then loads its game in ~10 ms instead
#: of ~0.7 s). An image without it only makes steps slower (the runner reports the failed
#: preimport and goes on).
PREIMPORT = ("skillopt_tw_warm",)


class TextWorldOptions(EnvOptions):
    """``env.options`` of TextWorld."""

    history_length: int = Field(default=2, ge=0, le=50)
    """Earlier (action, observation) pairs shown in each step's prompt (reference §5.2: 2)."""
    step_timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Longest one game step (replaying the episode's actions in the container) may take."""


SPEC = EnvSpec(
    name="textworld",
    summary="interactive text games (TextWorld challenges, generated from seeds), played step by step",
    agents=(
        AgentSpec(
            name="play",
            sandbox="isolated",
            image=IMAGE,
            preimport=PREIMPORT,
            summary="one action per step; the game runs in the rollout's container",
        ),
    ),
    default_agent="play",
    environment="skillopt.envs.textworld.env:TextWorldEnv",
    data="skillopt.envs.textworld.data:TextWorldData",
    options=TextWorldOptions,
)
