"""TextWorld figures (figures, not tests). Prints one JSON object.

Run: ``python bench/bench_textworld.py``. Needs ``skillopt-textworld:latest``
(``bash docker/build.sh --only textworld``) and the ``textworld`` extra.

1. ``generation``: seconds per game to generate the vendored seed list (from each game's
   ``meta.json``, i.e. as measured when it was first generated on this machine).
2. ``rollouts``: one ``skillopt serve`` process on this machine's engine, driven over gRPC by
   the fleet client; the offline simulation plays every val game by its walkthrough (its skill
   states every rule), then with ``look`` up to a 10-step limit. Per rollout: wall time, steps,
   game steps per second in the container (each step replays the episode's actions: a fresh
   process that loads the game), and model time.

All on this machine's 2 cores, shared: read ratios, not absolutes.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controller.client.sandbox_client import ChannelConfig  # noqa: E402
from controller.embedded import spawn_service, wait_listening  # noqa: E402
from controller.fleet.executor import FleetExecutor  # noqa: E402
from skillopt.envs.registry import load_env_data  # noqa: E402
from skillopt.envs.textworld.games import GAMES_FILE, ensure_game, load_game_specs  # noqa: E402
from skillopt.testing.fixtures.textworld import load_catalogue  # noqa: E402
from skillopt.testing.simulation import SIM_TARGET, simulation_server  # noqa: E402
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillVersion  # noqa: E402


def _stats(values: list[float]) -> dict:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


def main() -> None:
    gen = [ensure_game(s).generation_s for s in load_game_specs(GAMES_FILE)]
    items = load_env_data("textworld").split("val")
    rules = "\n".join(f"- {r}" for r in load_catalogue()["rules"].values())
    out: dict = {"generation": {"games": len(gen), "seconds_per_game": _stats(gen)}}
    tmp = Path(tempfile.mkdtemp(prefix="so-twbench-", dir="/tmp"))
    token = uuid.uuid4().hex
    (tmp / "token").write_text(token)
    with simulation_server() as sim:
        proc = spawn_service(
            [
                "--listen", "127.0.0.1:0", "--token-file", str(tmp / "token"), "--host-id", "twbench",
                "--state-dir", str(tmp / "state"), "--capacity", "2", "--pool-size", "2",
                "--provider", f"sim=openai_compatible,base_url={sim.base_url},max_retries=0",
                "--exec-agents", "off", "--drain-grace", "5",
            ]
        )  # fmt: skip
        try:
            address = f"127.0.0.1:{wait_listening(proc, 180)}"
            for label, skill in (("walkthrough", rules), ("look_until_limit", "")):
                reqs = [
                    RolloutRequest(
                        rollout_id=f"twbench/{label}/{it.id}/{uuid.uuid4().hex[:6]}",
                        env="textworld",
                        agent="play",
                        task=it.task,
                        grading=it.grading,
                        skill=SkillVersion(content=skill),
                        model=ModelSpec(provider="sim", model=SIM_TARGET),
                        limits=Limits(wall_time_s=300, max_turns=10),
                    )
                    for it in items
                ]
                rows = []
                with FleetExecutor([ChannelConfig(address=address, token=token)], workers=2) as fleet:
                    t0 = time.monotonic()
                    fleet.run(reqs, on_result=rows.append, stop=threading.Event())
                    wall = time.monotonic() - t0
                ok = [r for r in rows if r.infra_error is None]
                out[label] = {
                    "rollouts": len(rows),
                    "infra_errors": len(rows) - len(ok),
                    "won": sum(r.hard for r in ok),
                    "batch_wall_s": round(wall, 1),
                    "rollout_total_s": _stats([r.timings_s["total"] for r in ok]),
                    "steps": _stats([float(r.n_turns) for r in ok]),
                    "game_steps_per_s_in_container": _stats(
                        [(r.n_turns + 1) / r.timings_s["exec"] for r in ok if r.timings_s.get("exec")]
                    ),
                    "game_step_s": _stats(
                        [e.duration_s for r in ok for e in r.trace.executions if e.case == "step"]
                    ),
                    "model_s_per_rollout": _stats([r.timings_s.get("model", 0.0) for r in ok]),
                    "acquire_s": _stats([r.timings_s.get("acquire", 0.0) for r in ok]),
                }
        finally:
            proc.terminate()
            proc.wait(60)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
