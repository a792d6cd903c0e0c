"""Skill packages through the real service and real Docker: a package's script runs in the
rollout container from the read-only mount and cannot change the package; a package that
breaks a rule is refused before anything runs, naming the file and the rule; a version crosses
the wire once per host (its later rollouts send its tree hash alone); sessions mount packages,
where the agent CLIs look on the gateway network; a host that mounts no packages is named and
skipped before any rollout."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import signal
import tempfile
import threading
import uuid
from collections.abc import Iterator

import pytest

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from controller.client.sessions import SandboxSession, SessionEndpoints
from controller.embedded import spawn_service, wait_listening
from controller.fleet.executor import FleetExecutor
from controller.fleet.hosts import FleetEvent
from skillopt.envs.base import TaskItem
from skillopt.envs.registry import load_env_data
from skillopt.errors import SkillPackageRefused, SkillPackageUnsupported
from skillopt.skill.package import PackageLimits, write_package
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillFile, SkillVersion, WorkOutcome
from tests.sandbox.conftest import Service, fenced, request_for, solution_code, start_service

MiB = 1024 * 1024
TASK = "32255"
#: The host's limits in this module: small, so that a test can pass them cheaply.
LIMITS = PackageLimits(max_files=60, max_bytes=3 * MiB)

HELLO = b'#!/bin/sh\necho "hello from the package: $(cat "$(dirname "$0")/../references/rules.md")"\n'


def package(
    name: str = "xlsx-helper", *, marker: str = "RULE-42", extra: int = 0, size: int = 0
) -> SkillVersion:
    """A valid package: SKILL.md, an executable script, a reference; ``extra`` more references
    of ``size`` bytes each (unique per call, so each call is a version no host has seen)."""
    salt = uuid.uuid4().hex
    files = [
        SkillFile(path="references/rules.md", data=f"{marker}\n".encode()),
        SkillFile(path="scripts/hello.sh", data=HELLO, executable=True),
        SkillFile(path="scripts/helper.py", data=b"def double(x):\n    return 2 * x\n"),
        *(
            SkillFile(
                path=f"references/r{i:03d}.md",
                data=(f"# {salt} {i}\n" + "x" * 79 + "\n").encode() * max(1, size // 88),
            )
            for i in range(extra)
        ),
    ]
    return SkillVersion(
        name=name,
        content=f"---\nname: {name}\ndescription: Spreadsheet helper ({salt}).\n---\n# Helper\nRun scripts/hello.sh.\n",
        files=tuple(sorted(files, key=lambda f: f.path)),
    )


def package_bytes(skill: SkillVersion) -> int:
    return len(skill.content.encode()) + sum(len(f.data) for f in skill.files)


@pytest.fixture(scope="module")
def pkg_service(docker_client, scripted) -> Iterator[Service]:
    yield from start_service(scripted, capacity=2, pool_size=1, package_limits=LIMITS)


@dataclasses.dataclass
class OldHost:
    address: str
    token: str


@pytest.fixture(scope="module")
def old_host(docker_client, scripted, tmp_path_factory) -> Iterator[OldHost]:
    """A host that mounts SKILL.md alone: ``skillopt serve --skill-max-files 0``, a process of
    its own, says in Describe what a host that predates packages says."""
    tmp = tmp_path_factory.mktemp("old-host")
    state = tempfile.mkdtemp(prefix="so-old-", dir="/tmp")  # short: unix socket paths
    token = uuid.uuid4().hex
    (tmp / "token").write_text(token)
    proc = spawn_service(
        [
            "--listen", "127.0.0.1:0",
            "--token-file", str(tmp / "token"),
            "--host-id", f"test-old-{uuid.uuid4().hex[:6]}",
            "--state-dir", state,
            "--capacity", "1",
            "--pool-size", "0",
            "--provider", f"scripted=openai_compatible,base_url={scripted.base_url},max_retries=0",
            "--skill-max-files", "0",
            "--drain-grace", "3",
        ]
    )  # fmt: skip
    try:
        port = wait_listening(proc, 120)
        yield OldHost(address=f"127.0.0.1:{port}", token=token)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
        shutil.rmtree(state, ignore_errors=True)


def client(service: Service) -> SandboxClient:
    return SandboxClient(ChannelConfig(address=service.running.address, token=service.token))


def qa_item() -> TaskItem:
    data = load_env_data("officeqa")
    return next(it for s in ("train", "val", "test") for it in data.split(s) if it.id == "UID0001")


def qa_request(skill: SkillVersion) -> RolloutRequest:
    """A rollout whose agent runs no container (what is measured is the wire and the door)."""
    it = qa_item()
    return RolloutRequest(
        rollout_id=f"test/pkg/{uuid.uuid4().hex[:8]}",
        env="officeqa",
        agent="qa",
        task=it.task,
        grading=it.grading,
        skill=skill,
        model=ModelSpec(provider="scripted", model="gpt-5.5"),
        limits=Limits(wall_time_s=60, max_turns=1),
    )


def answer_qa(scripts) -> None:
    it = qa_item()
    scripts.scripts[it.task.instruction[:80]] = [
        {"text": f"<answer>{it.grading.attributes['answer']}</answer>"}
    ]


PROBE = r"""
import os, subprocess, sys
out = subprocess.run(["/skill/scripts/hello.sh"], capture_output=True, text=True)
print("SCRIPT:", out.returncode, out.stdout.strip())
print("MODE:", oct(os.stat("/skill/scripts/hello.sh").st_mode & 0o777), oct(os.stat("/skill/references/rules.md").st_mode & 0o777))
sys.path.insert(0, "/skill/scripts")
import helper
print("IMPORT:", helper.double(21))
for what, act in [
    ("append", lambda: open("/skill/SKILL.md", "a").write("x")),
    ("create", lambda: open("/skill/scripts/new.py", "w").write("x")),
    ("chmod", lambda: os.chmod("/skill/references/rules.md", 0o777)),
    ("remove", lambda: os.remove("/skill/scripts/hello.sh")),
]:
    try:
        act()
        print("WROTE:", what)
    except OSError as exc:
        print("REFUSED:", what, exc.errno)
"""


def test_a_package_script_runs_in_the_rollout_container_and_cannot_change_the_package(
    pkg_service, scripts, sample
):
    skill = package()
    store = pkg_service.running.service.runtime.packages  # the host's placed versions
    written, linked = store.written, store.linked
    marker = sample.task(TASK).instruction[:120]
    scripts.scripts[marker] = [fenced(PROBE + "\n" + solution_code(TASK))]
    try:
        with client(pkg_service) as c:
            rows = [
                c.run(dataclasses.replace(request_for(sample, TASK), skill=skill), timeout_s=180)
                for _ in range(2)
            ]
    finally:
        del scripts.scripts[marker]
    for row in rows:
        assert row.infra_error is None and row.hard == 1.0, (row.fail_reason, row.trace.executions)
        out = "\n".join(e.stdout_tail for e in row.trace.executions)
        assert "SCRIPT: 0 hello from the package: RULE-42" in out, out
        assert "MODE: 0o755 0o644" in out and "IMPORT: 42" in out, out
        assert "WROTE" not in out, out
        for what in ("append", "create", "chmod", "remove"):
            assert f"REFUSED: {what}" in out, out
        assert row.timings_s["skill"] >= 0.0
    # The version was written into the host's package store once, then placed as links.
    assert (store.written - written, store.linked - linked) == (1, 1)


@pytest.mark.parametrize(
    ("mutate", "path", "rule"),
    [
        (
            lambda s: [*s.files, SkillFile(path="../escape.sh", data=b"echo out\n")],
            "../escape.sh",
            "parent-path",
        ),
        (
            lambda s: [*s.files, SkillFile(path="references/latin1.md", data="caf\xe9".encode("latin-1"))],
            "references/latin1.md",
            "utf-8",
        ),
        (
            lambda s: [*s.files, *(SkillFile(path=f"r/{i}.md", data=b"x") for i in range(60))],
            "",
            "too-many-files",
        ),
        (
            lambda s: [*s.files, SkillFile(path="assets/big.bin", data=b"\0" * (3 * MiB))],
            "assets/big.bin",
            "too-large",
        ),
    ],
    ids=["parent-path", "utf-8", "too-many-files", "too-large"],
)
def test_a_package_that_breaks_a_rule_is_refused_naming_the_file_and_the_rule(
    pkg_service, scripts, mutate, path, rule
):
    skill = package()
    bad = dataclasses.replace(skill, files=tuple(mutate(skill)))
    calls = len(pkg_service.model.requests)
    with pytest.raises(SkillPackageRefused) as err:
        client(pkg_service).run(qa_request(bad), timeout_s=60)
    assert (path, rule) in [(p, r) for p, r, _ in err.value.problems], err.value.problems
    assert f"[{rule}]" in err.value.message and (path or "package") in err.value.message
    assert err.value.outcome is WorkOutcome.FINAL
    assert len(pkg_service.model.requests) == calls  # nothing ran


def test_a_name_other_than_the_front_matters_is_refused(pkg_service):
    skill = dataclasses.replace(package(), name="other-name")
    with pytest.raises(SkillPackageRefused) as err:
        client(pkg_service).run(qa_request(skill), timeout_s=60)
    assert ("SKILL.md", "name-folder") in [(p, r) for p, r, _ in err.value.problems]


def test_the_second_rollout_of_a_version_sends_no_file_bytes(pkg_service, scripts):
    skill = package(extra=49, size=40_000)  # 52 files, ~2 MiB
    assert len(skill.files) + 1 >= 50 and package_bytes(skill) > 1.9 * MiB
    answer_qa(scripts)
    store = pkg_service.running.servicer.blobs
    with client(pkg_service) as c:
        row = c.run(qa_request(skill), timeout_s=60)
        assert row.infra_error is None and row.hard == 1.0, row.fail_reason
        first = c.blobs.inline_bytes
        assert first >= package_bytes(skill)
        stored = store.stats()["stored"]
        for _ in range(2):
            row = c.run(qa_request(skill), timeout_s=60)
            assert row.infra_error is None and row.hard == 1.0, row.fail_reason
        assert c.blobs.inline_bytes == first  # not one byte of the package (nor the corpus) again
        assert c.blobs.named_bytes >= 2 * package_bytes(skill)
        assert store.stats()["stored"] == stored
        # What travels now: the name and the tree hash, no file, no per-file hash.
        msg, _ = c._message(qa_request(skill))
        assert (msg.skill.name, msg.skill.tree_sha256) == (skill.name, skill.tree_sha256)
        assert not msg.skill.files and not msg.skill.content and not msg.skill.sha256


def test_a_version_the_host_no_longer_keeps_is_sent_again_in_full(pkg_service, scripts):
    skill = package(extra=3, size=10_000)
    answer_qa(scripts)
    with client(pkg_service) as c:
        # The client believes the host keeps the version (the host restarted, or evicted it).
        c.blobs.learn([skill.tree_sha256])
        row = c.run(qa_request(skill), timeout_s=60)
        assert row.infra_error is None and row.hard == 1.0, row.fail_reason
        assert c.blobs.inline_bytes >= package_bytes(skill)  # the second attempt listed it all


def test_sessions_mount_a_package_read_only(pkg_service):
    skill = package(marker="SESSION-RULE")
    where = SessionEndpoints(endpoints=(pkg_service.running.address,), token=pkg_service.token)
    with SandboxSession.create(where, skill=skill) as box:
        assert box.read_file("/skill/SKILL.md") == skill.content.encode()
        result = box.exec(["/skill/scripts/hello.sh"])
        assert result.stdout == b"hello from the package: SESSION-RULE\n", result
        for argv in (
            ["touch", "/skill/new"],
            ["chmod", "777", "/skill/scripts/hello.sh"],
            ["rm", "/skill/SKILL.md"],
        ):
            assert box.exec(argv).exit_code != 0, argv
        # No gateway network: no agent CLI looks for skills here, nothing is mounted there.
        assert box.exec(["ls", "/workspace/.claude"]).exit_code != 0


def test_exec_agent_containers_see_the_package_where_the_clis_look(pkg_service):
    # CI's host has the gateway network (.ci/run starts the engine): never skipped, a failure.
    service = pkg_service.running.service
    assert service.gateway_url is not None, f"exec agents are off on this host: {service.exec_unavailable}"
    skill = package(marker="CLI-RULE")
    where = SessionEndpoints(endpoints=(pkg_service.running.address,), token=pkg_service.token)
    with SandboxSession.create(where, skill=skill, network="gateway") as box:
        for root in (".claude/skills", ".agents/skills"):
            home = f"/workspace/{root}/{skill.name}"
            assert box.exec(["ls", f"/workspace/{root}"]).stdout == f"{skill.name}\n".encode()
            assert box.read_file(f"{home}/SKILL.md") == skill.content.encode()
            result = box.exec([f"{home}/scripts/hello.sh"])
            assert result.stdout == b"hello from the package: CLI-RULE\n", result
            assert box.exec(["touch", f"{home}/new"]).exit_code != 0
            assert box.exec(["mkdir", f"/workspace/{root}/planted"]).exit_code != 0


def test_a_package_is_refused_for_a_session_like_for_a_rollout(pkg_service):
    skill = package()
    bad = dataclasses.replace(skill, files=(*skill.files, SkillFile(path="/etc/evil", data=b"x")))
    where = SessionEndpoints(endpoints=(pkg_service.running.address,), token=pkg_service.token)
    with pytest.raises(SkillPackageRefused) as err:
        SandboxSession.create(where, skill=bad)
    assert ("/etc/evil", "absolute-path") in [(p, r) for p, r, _ in err.value.problems]


def test_a_host_without_packages_is_named_and_skipped_before_any_rollout(pkg_service, old_host, scripts):
    skill = package(marker="FLEET-RULE")
    answer_qa(scripts)
    # One client, one old host: refused before anything is sent, as "not started".
    with SandboxClient(ChannelConfig(address=old_host.address, token=old_host.token)) as c:
        assert c.describe().skill_package_max_files == 0
        calls = len(pkg_service.model.requests)
        with pytest.raises(SkillPackageUnsupported) as err:
            c.run(qa_request(skill), timeout_s=60)
        assert err.value.outcome is WorkOutcome.NOT_STARTED and old_host.address in err.value.message
        assert len(pkg_service.model.requests) == calls
        # A one-file skill still runs there as it always did.
        row = c.run(qa_request(SkillVersion(content="# Rules\n")), timeout_s=60)
        assert row.infra_error is None and row.hard == 1.0
    events: list[FleetEvent] = []
    channels = [
        ChannelConfig(address=old_host.address, token=old_host.token),
        ChannelConfig(address=pkg_service.running.address, token=pkg_service.token),
    ]
    with FleetExecutor(channels, workers=2, on_event=events.append) as fleet:
        rows = []
        fleet.run([qa_request(skill) for _ in range(3)], on_result=rows.append, stop=threading.Event())
    assert [e.address for e in events if e.kind == "host_skipped"] == [old_host.address]
    assert "predates skill packages" in next(e.detail for e in events if e.kind == "host_skipped")
    assert len(rows) == 3 and all(r.infra_error is None and r.host == pkg_service.host_id for r in rows)
    # A fleet of old hosts alone refuses the batch before any rollout.
    calls = len(pkg_service.model.requests)
    with FleetExecutor(channels[:1], workers=1) as fleet, pytest.raises(SkillPackageUnsupported) as err:
        fleet.run([qa_request(skill)], on_result=rows.append, stop=threading.Event())
    assert "predates skill packages" in err.value.message
    assert len(pkg_service.model.requests) == calls


def test_the_inspect_provider_mounts_a_package_folder_from_its_config(pkg_service, tmp_path):
    from controller.client.inspect_provider import SkillOptSandboxConfig, SkillOptSandboxEnvironment

    folder = write_package(package(marker="INSPECT-RULE"), tmp_path / "skills")
    (tmp_path / "token").write_text(pkg_service.token)
    config = SkillOptSandboxConfig(
        endpoints=[pkg_service.running.address], token_file=str(tmp_path / "token"), skill=str(folder)
    )

    async def sample() -> str:
        await SkillOptSandboxEnvironment.task_init("pkg", config)
        envs = await SkillOptSandboxEnvironment.sample_init("pkg", config, {})
        try:
            result = await envs["default"].exec(["/skill/scripts/hello.sh"])
            assert result.success, result
            denied = await envs["default"].exec(["touch", "/skill/scripts/new.sh"])
            assert not denied.success
            return result.stdout
        finally:
            await SkillOptSandboxEnvironment.sample_cleanup("pkg", config, envs, interrupted=False)

    assert asyncio.run(sample()) == "hello from the package: INSPECT-RULE\n"
