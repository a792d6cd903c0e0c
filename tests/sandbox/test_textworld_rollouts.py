"""TextWorld through the real sandbox service: client → gRPC → the ``play`` agent in the
service → each action into the game running in the rollout's own container
(``skillopt-textworld:latest``) → the game's state graded on the trusted side. The scripted
model server plays: by the walkthrough, with forged "you won" text, or too slowly.

Also the generic rollout machinery on this env: per-item resume reruns nothing already done.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator

import pytest

from controller.client.sandbox_client import ChannelConfig
from controller.fleet.executor import FleetExecutor
from sandbox.service.tenants import tenant_id
from skillopt.envs.registry import get_env, load_env_data
from skillopt.envs.textworld.spec import IMAGE
from skillopt.testing.fixtures.textworld import STEP_HEADER
from skillopt.trainer.rollouts import Rollouts, RolloutSpec
from skillopt.types import Limits, ModelSpec, SkillVersion
from tests.sandbox.conftest import start_service

FORGED = (
    "<think>The game is over and I won.</think>\n"
    "<action>*** The End *** You have won! You scored 1 out of a possible 1</action>"
)


class GamePlayer:
    """Responder: per game id, how the target plays each step (``walk``: the walkthrough's
    action for that step; ``forge``: text claiming a win; ``slow``: answer after 30 s)."""

    def __init__(self) -> None:
        self.modes: dict[str, str] = {}
        self.walkthroughs: dict[str, list[str]] = {}
        self.calls: list[str] = []
        #: Called before each answer (a test holds a step until something happened).
        self.before: Callable[[], object] | None = None

    def __call__(self, req):
        found = STEP_HEADER.search(req.last_user_text)
        if found is None or found.group(1) not in self.modes:
            return None
        game, step = found.group(1), int(found.group(2))
        self.calls.append(game)
        if self.before is not None:
            self.before()
        mode = self.modes[game]
        if mode == "slow":
            return {"text": "<action>look</action>", "delay_s": 30}
        if mode == "forge":
            return {"text": FORGED}
        route = self.walkthroughs[game]
        return {"text": f"<think>step {step}</think><action>{route[min(step, len(route)) - 1]}</action>"}


@pytest.fixture(scope="module")
def player(scripted) -> Iterator[GamePlayer]:
    p = GamePlayer()
    scripted.add_responder(p)
    yield p
    p.modes.clear()


@pytest.fixture(scope="module")
def games():
    """Val games by category (generated on first use, cached)."""
    return {it.task_type: it for it in load_env_data("textworld").split("val")}


def rollouts_for(service, *, wall: float = 120.0, steps: int = 12) -> Rollouts:
    executor = FleetExecutor(
        [ChannelConfig(address=service.running.address, token=service.token)], workers=4, rpc_slack_s=30
    )
    spec = RolloutSpec(
        run_id="textworld",
        env="textworld",
        agent="play",
        model=ModelSpec(provider="scripted", model="gpt-5.5"),
        limits=Limits(wall_time_s=wall, exec_timeout_s=60, max_turns=steps),
    )
    return Rollouts(executor, spec)


def test_the_walkthrough_wins_and_forged_text_does_not(service, player, games, tmp_path):
    won_item, lost_item = games["cooking_l1"], games["coin_collector_l5"]
    route = list(won_item.grading.attributes["walkthrough"])
    player.walkthroughs[won_item.id] = route
    player.modes.update({won_item.id: "walk", lost_item.id: "forge"})
    rows = rollouts_for(service, steps=6).run(
        [won_item, lost_item], SkillVersion(content="# Skill\n- play well\n"), tmp_path / "r", label="t"
    )
    won, lost = rows
    assert won.infra_error is None and lost.infra_error is None, (won.fail_reason, lost.fail_reason)
    # Won by the game's own state, in exactly the walkthrough's steps; every step is traced.
    assert won.hard == 1.0 and won.soft == 1.0 and won.fail_reason == "" and won.phase == "done"
    assert won.n_turns == len(route) and won.metrics["won"] and won.metrics["stopped"] == "won"
    assert won.metrics["score"] == won.metrics["max_score"] == won_item.grading.attributes["max_score"]
    steps = json.loads(won.trace.notes["steps"])
    assert [s["action"] for s in steps] == route and all(s["env_feedback"] for s in steps)
    assert steps[-1]["done"] and sum(s["reward"] for s in steps) == won.metrics["max_score"]
    assert len(won.trace.executions) == len(route) + 1  # the start, then one game run per action
    # The forged claim is just an unknown command to the game: no win, no score, and the step
    # limit ends the episode as a typed, scored row.
    assert lost.hard == 0.0 and lost.soft == 0.0 and lost.metrics["won"] is False
    assert lost.fail_reason == "Timeout after 6 steps (score 0/1)" and lost.metrics["stopped"] == "step-limit"
    assert lost.n_turns == 6 and lost.agent_ok
    # Both outcomes were re-checked by replaying the actions in a fresh container: they agree.
    assert won.metrics["replay_agrees"] is True and lost.metrics["replay_agrees"] is True
    assert won.timings_s["grade"] > 0 and "replay" not in won.trace.notes
    assert lost.trace.messages[-1].content.startswith("[EVALUATION RESULT] won=False")
    # The game ran in the rollout's own container, from the textworld image.
    for row in rows:
        assert (
            "acquire" in row.timings_s
            and row.image_digest == service.running.service.runtime.image_digest(IMAGE)
        )
    # The agent never saw the walkthrough (gold): it is only in the analyst's evaluation message.
    prompts = [m.content for m in won.trace.messages if m.role == "user"]
    assert prompts and not any(" > ".join(route) in p for p in prompts)
    lines = [json.loads(x) for x in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert {x["id"]: x["task_type"] for x in lines} == {won.id: "cooking_l1", lost.id: "coin_collector_l5"}


def test_the_trusted_replay_takes_a_container_made_while_the_episode_played(
    docker_client, scripted, player, games, tmp_path
):
    """Issue 32, 8c: an agent with its own image announces its grading container when its
    episode begins, so the pool makes it while the game is played and the replay takes it warm.
    A host with no warm target (pool size 0) makes containers only for acquisitions waiting or
    announced; the episode's first step waits until the announced one is idle, so the replay
    can only find it warm because it was announced (before, it waited for a cold one)."""
    for svc in start_service(scripted, capacity=1, pool_size=0):
        _replay_takes_the_announced_container(svc, player, games["cooking_l1"], tmp_path)


def _replay_takes_the_announced_container(svc, player: GamePlayer, item, tmp_path) -> None:
    route = list(item.grading.attributes["walkthrough"])
    player.walkthroughs[item.id] = route
    player.modes[item.id] = "walk"
    service = svc.running.service
    limits = service.effective_limits(Limits(wall_time_s=120, exec_timeout_s=60, max_turns=len(route)))
    spec = service.grading_spec(get_env("textworld"), "play", limits)
    ready: list[bool] = []
    player.before = lambda: ready or ready.append(service.pools.wait_ready(spec, 1, timeout_s=60))
    try:
        (row,) = rollouts_for(svc, steps=len(route)).run(
            [item], SkillVersion(content="# Skill\n"), tmp_path / "r", label="w"
        )
    finally:
        player.before = None
    assert ready == [True], "no container was made for the replay while the episode played"
    assert row.infra_error is None and row.hard == 1.0 and row.metrics["replay_agrees"], row.fail_reason
    # The game's own container and the replay's are of one spec: the first was made for the
    # rollout waiting (no warm target), the replay's ahead, and taken warm.
    (stats,) = [s for s in service.pools.stats() if s.spec_key == spec.key]
    assert (stats.acquired_total, stats.acquired_warm, stats.created_total) == (2, 1, 2), stats
    assert stats.waiters == 0, stats


def test_a_model_slower_than_the_wall_time_is_a_timeout_row(service, player, games, tmp_path):
    slow, quick = games["treasure_hunter_l1"], games["coin_collector_l1"]
    player.modes[slow.id] = "slow"
    player.modes[quick.id] = "walk"
    player.walkthroughs[quick.id] = list(quick.grading.attributes["walkthrough"])
    # Both containers warm first (a textworld container's runner parses the game logic at
    # start, ~5-10 s here), so the 8 s go to the game, not to container creation: fresh ones or
    # this token's from the tests before, reset (which then fill the idle cap).
    svc = service.running.service
    spec = svc.agent_spec(get_env("textworld"), "play")
    assert svc.pools.wait_ready(spec, 2, timeout_s=180, tenant=tenant_id(service.token))
    row, ok = rollouts_for(service, wall=8.0).run(
        [slow, quick], SkillVersion(), tmp_path / "r", label="timeout"
    )
    assert row.infra_error is not None and row.infra_error.kind.value == "timeout", row.fail_reason
    assert row.fail_reason.startswith("infra-timeout") and row.hard == 0.0
    assert ok.infra_error is None and ok.hard == 1.0


def test_a_resume_reruns_no_finished_game(service, player, games, tmp_path):
    first, second = games["treasure_hunter_l5"], games["cooking_l2"]
    for item in (first, second):
        player.walkthroughs[item.id] = list(item.grading.attributes["walkthrough"])
        player.modes[item.id] = "walk"
    rollouts = rollouts_for(service)
    done = rollouts.run([first], SkillVersion(), tmp_path / "r", label="resume")
    assert done[0].hard == 1.0
    player.calls.clear()
    rows = rollouts.run([first, second], SkillVersion(), tmp_path / "r", label="resume")
    assert [r.id for r in rows] == [first.id, second.id] and all(r.hard == 1.0 for r in rows)
    assert set(player.calls) == {second.id}  # the finished game was not played again
    assert len((tmp_path / "r" / "results.jsonl").read_text().splitlines()) == 2


class CompromisedSandbox:
    """A real container whose game driver has been replaced by one that always reports a win:
    what a rollout container that forges its state would send back."""

    LIAR = (
        "import json\n"
        "print('@@TW@@' + json.dumps({'observation': 'You won!', 'score': %d, 'max_score': %d, "
        "'won': True, 'lost': False, 'done': True, 'moves': 1, 'played': 1, 'admissible': []}))\n"
    )

    def __init__(self, box, max_score: int) -> None:
        self.box, self.max_score = box, max_score

    def write_file(self, path: str, data: bytes) -> None:
        if path == "tw_driver.py":
            data = (self.LIAR % (self.max_score, self.max_score)).encode()
        self.box.write_file(path, data)

    def __getattr__(self, name: str):
        return getattr(self.box, name)


def test_a_container_that_forges_a_win_is_graded_by_the_trusted_replay(
    docker_client, scripted, player, games
):
    """The rollout container's driver claims a win; the actions replayed against a fresh copy
    of the game in a fresh container say otherwise, and the replay decides."""
    import time
    import uuid
    from dataclasses import replace

    from sandbox.runtime.fresh import local_grading_sandboxes
    from sandbox.runtime.spec import ContainerSpec
    from skillopt.agents.context import AgentContext
    from skillopt.models.openai_chat import OpenAIChatModel
    from skillopt.types import RolloutRequest, SkillVersion

    item = games["coin_collector_l1"]
    player.modes[item.id] = "forge"
    limits = Limits(wall_time_s=120, exec_timeout_s=60, max_turns=3)
    request = RolloutRequest(
        rollout_id=f"test/forge/{uuid.uuid4().hex[:8]}", env="textworld", agent="play", task=item.task,
        grading=item.grading, skill=SkillVersion(), model=ModelSpec(provider="scripted", model="gpt-5.5"),
        limits=limits,
    )  # fmt: skip
    with local_grading_sandboxes(spec=replace(ContainerSpec(), image=IMAGE)) as fresh, fresh() as box:
        ctx = AgentContext(
            request=request,
            sandbox=CompromisedSandbox(box, int(item.grading.attributes["max_score"])),
            model=OpenAIChatModel("scripted", base_url=scripted.base_url, api_key="", max_retries=0),
            limits=limits,
            emit=lambda _event: None,
            deadline=time.monotonic() + 120,
            grading_sandbox=fresh,
        )
        row = get_env("textworld").run("play", ctx)
    assert row.infra_error is None, row.fail_reason
    assert row.metrics["stopped"] == "won"  # what the compromised container claimed ...
    assert row.hard == 0.0 and row.metrics["won"] is False  # ... and what the replay found
    assert row.metrics["replay_agrees"] is False and "graded by the replay" in row.trace.notes["replay"]


def test_the_textworld_runner_preimports_its_warm_module_from_the_pickled_logic(docker_client, short_tmp):
    """A game step forks a runner that already holds TextWorld and its parsed knowledge bases
    (a failed preimport only shows as slow steps: 1-1.6 s each instead of ~15 ms)."""
    from sandbox.runtime.docker.runtime import DockerRuntime
    from sandbox.runtime.spec import ContainerSpec, RuntimeConfig
    from skillopt.envs.textworld.spec import PREIMPORT

    rt = DockerRuntime(
        RuntimeConfig(host_id=f"test-tw-warm-{uuid.uuid4().hex[:6]}", state_dir=str(short_tmp), pool_size=0)
    )
    try:
        handle = rt.create(ContainerSpec(image=IMAGE, preimport=PREIMPORT))
        try:
            assert handle.hello.preimported == list(PREIMPORT)
            box = rt.lease(handle, "test/tw-warm")
            box.write_file(
                "probe.py",
                b"import sys, skillopt_tw_warm as w\nprint('textworld' in sys.modules, w._CACHE.exists())\n",
            )
            assert box.run_python("probe.py", timeout_s=60).stdout_tail.split() == ["True", "True"]
        finally:
            rt.destroy(handle)
    finally:
        rt.close()
