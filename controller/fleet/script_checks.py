"""The fleet's side of script checks: one sandbox session on a live host, with the package
mounted read-only at ``/skill`` and no network, runs the checks of
:mod:`skillopt.skill.checks`, then is destroyed (always, also on error).

The session goes to the host with the most free session slots; a host that refuses (full,
draining, sessions disabled, gone, predating packages) is skipped for the next. When no host
gives a session every script is ``unchecked``, a failed verdict: a script nobody checked is
never taken as passing. A sandbox failure while checking one script (not the script's fault)
makes that script ``unchecked`` and the rest are checked in a new session.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import structlog

from controller.client.sessions import ExecResult, SandboxSession, session_request
from controller.fleet.hosts import HostHealth, HostState
from skillopt.errors import SkillOptError
from skillopt.skill.checks import (
    DEFAULT_SELF_TEST_TIMEOUT_S,
    ScriptCheck,
    check_scripts,
    scripts_to_check,
    unchecked,
)
from skillopt.types import SkillVersion

__all__ = ["SESSION_LABELS", "check_scripts_on_hosts"]

log = structlog.get_logger("skillopt.controller.fleet.script_checks")

#: Labels of a check's session (``skillopt sessions list`` shows what it is for).
SESSION_LABELS = {"purpose": "script-check"}
#: Output kept per command of a check (only its tail is reported).
_OUTPUT_BYTES = 1024 * 1024
_DESCRIBE_TIMEOUT_S = 5.0
_ENABLE_HINT = (
    "Scripts are checked in a sandbox session: use a host that takes sessions (skillopt serve "
    "--max-sessions N with N > 0; the default is 64) and has room for one. An unchecked script "
    "is not accepted."
)


def check_scripts_on_hosts(
    hosts: Sequence[HostState],
    spec: SkillVersion,
    paths: Sequence[str],
    *,
    self_test_timeout_s: float = DEFAULT_SELF_TEST_TIMEOUT_S,
    create_timeout_s: float = 180.0,
) -> list[ScriptCheck]:
    """Check the scripts of ``spec`` that ``paths`` name (see
    :func:`skillopt.skill.checks.check_scripts`) in a session on one of ``hosts``.

    Returns:
        One :class:`ScriptCheck` per script, in input order; ``unchecked`` (failed) for each
        script no session could check, its message saying why and what to do.
    """
    files = scripts_to_check(spec, paths)
    verdicts: dict[str, ScriptCheck] = {}
    remaining = [f.path for f in files]
    while remaining:
        session, refusals = _open_session(hosts, spec, create_timeout_s)
        if session is None:
            why = (
                "no sandbox host gave a session to check it in (" + "; ".join(refusals) + "). " + _ENABLE_HINT
            )
            verdicts.update((c.path, c) for c in unchecked(spec, remaining, why))
            log.warning("script_checks.unchecked", skill=spec.name, paths=remaining, refusals=refusals)
            break
        remaining = _check_in(session, spec, remaining, self_test_timeout_s, verdicts)
    checks = [verdicts[f.path] for f in files]
    failed = [c.path for c in checks if not c.ok]
    log.info("script_checks.done", skill=spec.name, paths=[c.path for c in checks], failed=failed)
    return checks


def _check_in(
    session: SandboxSession,
    spec: SkillVersion,
    paths: list[str],
    self_test_timeout_s: float,
    verdicts: dict[str, ScriptCheck],
) -> list[str]:
    """Check ``paths`` one by one in ``session`` (destroyed on return) into ``verdicts``; the
    paths left when the sandbox failed (the one it failed on is ``unchecked``)."""
    address = session.client.config.address

    def run(argv: Sequence[str], timeout_s: float) -> ExecResult:
        return session.exec(argv, timeout=timeout_s, output_limit_bytes=_OUTPUT_BYTES)

    try:
        for index, path in enumerate(paths):
            try:
                (check,) = check_scripts(spec, [path], run, self_test_timeout_s=self_test_timeout_s)
            except SkillOptError as exc:
                why = f"the sandbox failed while checking it on {address} ({exc.message}); it is checked again next time"
                verdicts[path] = unchecked(spec, [path], why)[0]
                log.warning("script_checks.sandbox_failed", host=address, path=path, error=exc.message)
                return paths[index + 1 :]
            verdicts[path] = check
            log.info("script_checks.checked", host=address, path=path, ok=check.ok, rule=check.rule)
        return []
    finally:
        with contextlib.suppress(SkillOptError):  # a host that is gone took the session with it
            session.destroy()


def _open_session(
    hosts: Sequence[HostState], spec: SkillVersion, timeout_s: float
) -> tuple[SandboxSession | None, list[str]]:
    """A session with ``spec`` mounted on the best host that gives one, or ``None`` and why
    each host did not (one line per host)."""
    ranked, refusals = _rank(hosts, spec)
    request = session_request(skill=spec, network="none", labels=SESSION_LABELS)
    for host in ranked:
        try:
            session = SandboxSession.create_on(host.client, request, timeout_s=timeout_s, owns_client=False)
        except SkillOptError as exc:
            refusals.append(f"{host.address}: {exc.message}")
            log.info("script_checks.host_refused", host=host.address, error=exc.message)
            continue
        log.info("script_checks.session", host=host.address, session=session.id, skill=spec.name)
        return session, refusals
    return None, refusals or ["no sandbox host in the fleet"]


def _rank(hosts: Sequence[HostState], spec: SkillVersion) -> tuple[list[HostState], list[str]]:
    """The hosts that may give a session, most free session slots first, and why each other
    one may not. Each candidate is asked (``Describe``) how many sessions it holds."""
    scored: list[tuple[int, int, HostState]] = []
    refusals: list[str] = []
    for index, host in enumerate(hosts):
        why = _unfit(host, spec)
        if not why:
            try:
                info = host.client.describe(timeout_s=_DESCRIBE_TIMEOUT_S)
            except SkillOptError as exc:
                why = exc.message
            else:
                if info.draining:
                    why = "draining"
                elif info.max_sessions <= 0:
                    why = "takes no sessions (started with --max-sessions 0, or it predates sessions)"
                else:
                    scored.append((info.sessions - info.max_sessions, index, host))
        if why:
            refusals.append(why if why.startswith(host.address) else f"{host.address}: {why}")
    scored.sort(key=lambda t: (t[0], t[1]))
    return [host for _, _, host in scored], refusals


def _unfit(host: HostState, spec: SkillVersion) -> str:
    """Why the fleet would not place work on ``host`` now ("" when it would)."""
    if host.gone:
        return "left the fleet"
    if host.health is not HostHealth.UP:
        return f"is {host.health.value}"
    if host.excluded:
        return host.excluded
    return host.package_refusal(spec)
