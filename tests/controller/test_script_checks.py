"""Script checks through the fleet, on real sandbox services and real Docker: one session on
the host that takes sessions checks every script (compile, ``bash -n``, self-tests with a time
limit, the package read-only), and is gone afterwards; a host with sessions disabled or full
gives none, and then every script is ``unchecked``, never passing."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from controller.client.sandbox_client import ChannelConfig
from controller.client.sessions import SandboxSession, SessionEndpoints
from controller.fleet.executor import FleetExecutor
from sandbox.service.config import SessionConfig
from skillopt.skill.checks import ScriptCheck
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.types import SkillFile, SkillVersion
from tests.sandbox.conftest import Service, start_service

SCRIPTS = {
    # Its self-test works in its scratch directory (the session's workspace): passes.
    "scripts/good.py": (
        "import pathlib, sys\n"
        "def double(x):\n    return 2 * x\n"
        "if '--self-test' in sys.argv:\n"
        "    pathlib.Path('scratch.txt').write_text(str(double(21)))\n"
        "    assert pathlib.Path('scratch.txt').read_text() == '42'\n"
    ),
    "scripts/good.sh": '#!/bin/sh\nif [ "$1" = --self-test ]; then echo fine; exit 0; fi\necho "$@"\n',
    "scripts/broken.py": "import sys\ndef f(:\n    pass\n# --self-test\n",
    "scripts/broken.sh": "echo start\nif true; then\n  echo never closed\n",
    "scripts/fails.py": ("import sys\nif '--self-test' in sys.argv:\n    sys.exit('expected 4, got 5')\n"),
    "scripts/loops.py": "import sys\nif '--self-test' in sys.argv:\n    while True:\n        pass\n",
    "scripts/writes_skill.py": (
        "import sys\nif '--self-test' in sys.argv:\n    open('/skill/scripts/planted.txt', 'w').write('x')\n"
    ),
}


def package() -> SkillVersion:
    files = [
        SkillFile(path=p, data=text.encode(), executable=p.endswith(".sh")) for p, text in SCRIPTS.items()
    ]
    files.append(SkillFile(path="references/notes.md", data=b"# Notes\n"))
    salt = uuid.uuid4().hex[:8]
    return SkillVersion(
        name="checked-pkg",
        content=f"---\nname: checked-pkg\ndescription: Scripts to check ({salt}).\n---\n# Pkg\n",
        files=tuple(sorted(files, key=lambda f: f.path)),
    )


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


@pytest.fixture(scope="module")
def host(docker_client, scripted) -> Iterator[Service]:
    """Takes one session at a time."""
    yield from start_service(
        scripted, capacity=1, pool_size=1, server_kw={"sessions": SessionConfig(max_sessions=1)}
    )


@pytest.fixture(scope="module")
def no_sessions_host(docker_client, scripted) -> Iterator[Service]:
    """``skillopt serve --max-sessions 0``."""
    yield from start_service(
        scripted, capacity=1, pool_size=1, server_kw={"sessions": SessionConfig(max_sessions=0)}
    )


def channel(service: Service) -> ChannelConfig:
    return ChannelConfig(address=service.running.address, token=service.token)


def test_every_rule_is_checked_in_one_session_on_the_host_that_takes_sessions(host, no_sessions_host):
    skill = package()
    paths = [*SCRIPTS, "references/notes.md", "scripts/deleted.py"]
    with FleetExecutor([channel(no_sessions_host), channel(host)], workers=1) as fleet:
        checks = fleet.check_scripts(skill, paths, self_test_timeout_s=3.0)
    verdict = {c.path: c for c in checks}
    assert list(verdict) == list(SCRIPTS)  # input order; other files and deleted ones: no verdict
    assert verdict["scripts/good.py"] == ScriptCheck(path="scripts/good.py", ok=True, rule="")
    assert verdict["scripts/good.sh"].ok, verdict["scripts/good.sh"]
    assert verdict["scripts/broken.py"].rule == "python-compile"
    assert (
        "line 2" in verdict["scripts/broken.py"].message and "def f(:" in verdict["scripts/broken.py"].message
    )
    assert verdict["scripts/broken.sh"].rule == "bash-syntax"
    assert "syntax error" in verdict["scripts/broken.sh"].message
    assert verdict["scripts/fails.py"].rule == "self-test"
    assert "expected 4, got 5" in verdict["scripts/fails.py"].message
    assert verdict["scripts/loops.py"].rule == "self-test-timeout"
    assert "scripts/loops.py" in verdict["scripts/loops.py"].describe()
    assert verdict["scripts/writes_skill.py"].rule == "self-test"
    assert "Read-only file system" in verdict["scripts/writes_skill.py"].message
    # The session is gone, and the host without sessions never held one.
    assert host.running.servicer.sessions.count() == 0
    assert no_sessions_host.running.servicer.sessions.count() == 0


def test_without_a_session_anywhere_every_script_is_unchecked(host, no_sessions_host):
    skill = package()
    paths = ["scripts/good.py", "scripts/good.sh"]
    with FleetExecutor([channel(no_sessions_host)], workers=1) as fleet:
        checks = fleet.check_scripts(skill, paths)
    assert [(c.path, c.ok, c.rule) for c in checks] == [(p, False, "unchecked") for p in paths]
    assert no_sessions_host.running.address in checks[0].message and "--max-sessions" in checks[0].message
    # A full host (its one session taken by someone else) gives none either; freed, it does.
    where = SessionEndpoints(endpoints=(host.running.address,), token=host.token)
    with FleetExecutor([channel(host)], workers=1) as fleet:
        with SandboxSession.create(where):
            checks = fleet.check_scripts(skill, paths)
        assert [c.rule for c in checks] == ["unchecked", "unchecked"]
        assert "maximum of 1 sessions" in checks[0].message
        assert [c.ok for c in fleet.check_scripts(skill, paths)] == [True, True]
