"""What LiveMathematicianBench declares: agents, options, where its two sides live."""

from __future__ import annotations

from skillopt.envs._qa.roots import qa_data_root_problem
from skillopt.envs.base import AgentSpec, EnvOptions, EnvSpec

__all__ = ["SPEC", "LiveMathOptions"]


class LiveMathOptions(EnvOptions):
    """``env.options`` of LiveMathematicianBench."""

    shuffle_choices: bool = True
    """Shuffle each item's choices and relabel them A, B, C... (every released item has the
    correct choice under label A, so without shuffling "always A" scores 100%)."""
    shuffle_seed: int = 0
    """Seed of the choice order: item ``id`` is shuffled with ``sha256("<seed>:<id>")``."""
    use_theorem: bool = False
    """Add the source theorem's statement to the prompt."""
    use_sketch: bool = False
    """Add the proof sketch to the prompt."""


SPEC = EnvSpec(
    name="livemathematicianbench",
    summary="research-level theorem questions, multiple choice; accuracy of the chosen label",
    agents=(AgentSpec(name="qa", sandbox="none", summary="choose an option; runs no code, no container"),),
    default_agent="qa",
    environment="skillopt.envs.livemathematicianbench.env:LiveMathEnv",
    data="skillopt.envs.livemathematicianbench.data:LiveMathData",
    options=LiveMathOptions,
    raw_item="skillopt.envs.livemathematicianbench.items:item_from_raw",
    score_options={"shuffle_choices": False},
    data_root_problem=qa_data_root_problem,
)
