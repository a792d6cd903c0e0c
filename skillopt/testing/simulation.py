"""Offline simulation: the scripted model server plays both the target and the optimizer.

Used by the README's main job when no provider key is configured (announced as a simulation),
and by the end-to-end training tests. Everything else is real: the sandbox service, Docker
containers, the trusted grader, the trainer and its gate.

* **Target** (model ``sim-target``): it recognises the vendored sample task of every env that
  keeps a simulation catalogue in its folder (``skillopt/envs/<env>/simulation/catalogue.json``;
  :mod:`skillopt.testing.fixtures`) and answers right when the skill in its system prompt states
  the rule the task needs, else wrong, as the catalogue's family says: SpreadsheetBench answers
  are the task's reference scripts (correct, or plausibly wrong in one rule); question-answering
  envs answer the gold or the catalogue's wrong answer in ``<answer>`` tags; code envs
  (HumanEval, MBPP) the reference solution or a stub returning ``None``; TextWorld games (found
  by the step header of the prompt) are played by their walkthrough, else with ``look`` until
  the step limit. The rule counts as stated when its *signature* (its first words, case- and
  whitespace-insensitive) appears anywhere in the system prompt. Tasks without a catalogue
  entry are always solved.
* **Optimizer** (model ``sim-optimizer``): a failure analyst that proposes the catalogue rule of
  the failed tasks it is shown (the rules not yet in the skill, most frequent first), a success
  analyst that proposes generic advice that changes nothing (so the gate rejects it unless a
  real rule rides along), and merge, ranking, slow-update, meta-skill and probe answers in
  their prompts' JSON schemas. It reads the stage from the ``X-Skillopt-Stage`` header.
* **Package family** (:mod:`skillopt.testing.package_sim`; SpreadsheetBench's
  ``env.options.sample: package``): tasks solved only through a skill package, a rule stated
  in a reference file SKILL.md points to and the agent read, or a helper under ``scripts/``
  the program imports; the optimizer proposes reference files and scripts (a broken script
  first, the working one once a failed check of it is in its prompt).
* **Noisy target and optimizer** (models ``sim-target-noisy``, ``sim-optimizer-noisy``;
  ``run.simulate: noisy``): the same players, but a task passes with a probability (higher
  when the skill states its rule, lower with every harmful statement), drawn per rollout by
  the ``X-Skillopt-Seed`` header, and the optimizer also proposes decoy and harmful edits
  (:mod:`skillopt.testing.noise`). The same server plays both simulations: the run's choice of
  model decides.

Each player has its own module: :mod:`~skillopt.testing.sim_catalogue` (the rule each task
needs, and whether a skill states it), :mod:`~skillopt.testing.sim_target` and
:mod:`~skillopt.testing.sim_optimizer`. This module names the simulation's models and provider
profiles and starts the server that plays them (:func:`simulation_server`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from skillopt.testing.scripted import Responder, ScriptedModelServer, ScriptedRequest
from skillopt.testing.sim_catalogue import (
    COPY_MARK,
    pass_probability,
    rule_signature,
    simulated_pass,
    task_of_copy,
)
from skillopt.testing.sim_optimizer import SIM_NOISY_OPTIMIZER, SIM_OPTIMIZER, SimulatedOptimizer
from skillopt.testing.sim_target import SIM_NOISY_TARGET, SIM_TARGET, SimulatedTarget

__all__ = [
    "COPY_MARK",
    "SIM_ANTHROPIC_PROVIDER",
    "SIM_NOISY_OPTIMIZER",
    "SIM_NOISY_TARGET",
    "SIM_OPTIMIZER",
    "SIM_PROVIDER",
    "SIM_TARGET",
    "SimulatedOptimizer",
    "SimulatedTarget",
    "pass_probability",
    "rule_signature",
    "sim_models",
    "simulated_pass",
    "simulation_profiles",
    "simulation_server",
    "simulation_target_provider",
    "task_of_copy",
]

#: Provider profiles of the simulation, one per wire protocol: in-service agents and Codex
#: speak OpenAI's APIs, Claude Code speaks Anthropic Messages.
SIM_PROVIDER = "sim"
SIM_ANTHROPIC_PROVIDER = "sim-anthropic"


def sim_models(*, noisy: bool) -> tuple[str, str]:
    """The simulation's ``(target, optimizer)`` model names."""
    return (SIM_NOISY_TARGET, SIM_NOISY_OPTIMIZER) if noisy else (SIM_TARGET, SIM_OPTIMIZER)


def simulation_profiles(server: ScriptedModelServer) -> list[str]:
    """``--provider`` specs that point a sandbox host at ``server`` (both wire protocols)."""
    return [
        f"{SIM_PROVIDER}=openai_compatible,base_url={server.base_url},max_retries=0",
        f"{SIM_ANTHROPIC_PROVIDER}=anthropic,base_url={server.anthropic_base_url},max_retries=0",
    ]


def simulation_target_provider(api: str) -> str:
    """The simulation's provider profile for an agent speaking ``api`` (``openai`` or
    ``anthropic``; see the env's ``agent_apis``)."""
    return SIM_ANTHROPIC_PROVIDER if api == "anthropic" else SIM_PROVIDER


@contextlib.contextmanager
def simulation_server(*, before: Sequence[Responder] = (), **kwargs) -> Iterator[ScriptedModelServer]:
    """A scripted model server answering as the simulated target and optimizer.

    Args:
        before: responders asked first (a test's provider faults: an answer, or ``None`` to
            let the simulation answer).
        kwargs: for :class:`ScriptedModelServer`.
    """
    with ScriptedModelServer(
        responders=[
            *before,
            SimulatedTarget(),
            SimulatedOptimizer(),
            SimulatedOptimizer(noisy=True),
            _unknown_model,
        ],
        **kwargs,
    ) as server:
        yield server


def _unknown_model(req: ScriptedRequest) -> dict:
    """Anything the simulation does not play gets a clear model error (not test-harness words)."""
    return {
        "error": {
            "status": 400,
            "type": "invalid_request_error",
            "message": (
                f"offline simulation: no simulated model {req.model!r} ({req.api} API); the simulation plays "
                f"{SIM_TARGET!r} (the target) and {SIM_OPTIMIZER!r} (the optimizer), and their noisy "
                f"versions {SIM_NOISY_TARGET!r} and {SIM_NOISY_OPTIMIZER!r}"
            ),
        }
    }
