"""Code runs: one program (``run_code``) or one notebook (``run_jupyter``) per request, each in a
clean hardened container (fresh, or one of the tenant's reset to a verified clean slate:
``docs/recycling.md``), for the SandboxFusion-compatible HTTP API
(:mod:`sandbox.server.fusion_http` translates its JSON; this module takes domain values).

A code run is a short-lived session of its tenant: it is created, driven and destroyed through
:class:`~sandbox.service.sessions.SessionManager` like any session, so it takes a container of
the warm pool through the same lease, counts against the same host-wide and per-tenant session
caps, is refused while the host drains, and its commands get the sessions' output cap and
bounds. A failing, timed-out or runaway program is a verdict (``Failed``); only the sandbox's
own failure (no container, a dead runner, the engine) is ``SandboxError``.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from sandbox.service.languages import LANGUAGES, Language
from sandbox.service.session_policy import SessionRequest
from sandbox.service.sessions import Session, SessionManager
from sandbox.service.tenants import Tenant
from skillopt.agents.sandbox import ExecOutcome
from skillopt.errors import (
    Draining,
    InfraError,
    InvalidRequest,
    IsolationUnavailable,
    SandboxFileError,
    SessionLimit,
)
from skillopt.files import check_relative_name
from skillopt.units import MiB

__all__ = ["CodeRequest", "CodeResult", "CodeRunConfig", "CodeRunner", "CommandResult", "JupyterRequest"]

log = structlog.get_logger("skillopt.sandbox.coderun")

_DRIVER = (Path(__file__).parent / "jupyter_driver.py").read_text(encoding="utf-8")
_DRIVER_PATH = "/tmp/.skillopt_jupyter.py"
_CELLS_PATH = "/tmp/.skillopt_cells.jsonl"


@dataclass(frozen=True, kw_only=True)
class CodeRunConfig:
    """What code runs may ask for on this host."""

    #: The image code runs use (its languages: ``languages``).
    image: str
    languages: tuple[str, ...]
    #: Longest compile or run timeout (and a notebook's total); more is refused, not clamped.
    max_timeout_s: float = 300.0
    #: Largest source (or all cells together) accepted.
    max_code_bytes: int = 16 * MiB
    #: Most files in (and names fetched out) per request.
    max_files: int = 256
    #: Largest fetched file; larger ones are left out of the response.
    max_fetch_bytes: int = 32 * MiB


@dataclass(frozen=True, kw_only=True)
class CodeRequest:
    language: str
    code: bytes
    compile_timeout_s: float = 10.0
    run_timeout_s: float = 10.0
    stdin: bytes = b""
    files: tuple[tuple[str, bytes], ...] = ()
    fetch_files: tuple[str, ...] = ()
    #: The compile's and the run's address space, data and stack rlimits (SandboxFusion's
    #: ``memory_limit_MB``), capped at the container's memory limit; 0: none but the container's.
    memory_limit_mb: int = 0
    #: The isolation the caller requires of the container ("" = any, ``gvisor``): refused
    #: before any container is taken when this host's would not give it.
    isolation: str = ""


@dataclass(frozen=True, kw_only=True)
class JupyterRequest:
    cells: tuple[str, ...]
    #: Per cell (0: none) and for the whole notebook.
    cell_timeout_s: float = 0.0
    total_timeout_s: float = 45.0
    files: tuple[tuple[str, bytes], ...] = ()
    fetch_files: tuple[str, ...] = ()
    #: As :attr:`CodeRequest.isolation`.
    isolation: str = ""


@dataclass(frozen=True, kw_only=True)
class CommandResult:
    """One command's outcome, SandboxFusion's ``CommandRunResult``."""

    #: ``Finished`` (it ended, whatever its exit code), ``TimeLimitExceeded`` or ``Error``.
    status: str
    execution_time_s: float | None = None
    return_code: int | None = None
    stdout: str = ""
    stderr: str = ""


@dataclass(frozen=True, kw_only=True)
class CodeResult:
    """SandboxFusion's ``RunCodeResponse`` / ``RunJupyterResponse``, as domain values."""

    #: ``Success``, ``Failed`` (a program failed, timed out or a cell raised) or ``SandboxError``.
    status: str
    message: str = ""
    compile: CommandResult | None = None
    run: CommandResult | None = None
    #: Notebooks: one dict per cell run (stdout, stderr, display, error).
    cells: list[dict[str, object]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    executor: str = ""
    #: The OCI runtime the container actually ran under (``runc``, ``runsc``); "" when no
    #: container was had.
    container_runtime: str = ""


class CodeRunner:
    """Runs code requests as single-use sessions of ``sessions``. Thread-safe."""

    def __init__(self, config: CodeRunConfig, sessions: SessionManager) -> None:
        self.config = config
        self.sessions = sessions

    @property
    def host_id(self) -> str:
        return self.sessions.host_id

    def run_code(self, tenant: Tenant, request: CodeRequest) -> CodeResult:
        """Compile (when the language has a step) and run ``request.code``.

        Raises:
            InvalidRequest: a language this host lacks (naming the ones it has), bad
                timeouts, too much code, bad file names, too many files.
            SessionLimit, Draining: no room on this host now.
            IsolationUnavailable: the request requires an isolation this host cannot give.
        """
        lang = self._language(request.language)
        self._check_timeout(request.compile_timeout_s, "compile_timeout")
        self._check_timeout(request.run_timeout_s, "run_timeout")
        self._check_size(len(request.code))
        fetch = self._fetch_names(request.fetch_files)
        files = ((lang.source, request.code), *self._files(request.files))
        lifetime = request.compile_timeout_s + request.run_timeout_s + 60.0
        limit = self._rlimits(request.memory_limit_mb)
        with (
            self._infra_errors() as failed,
            self._session(tenant, files, lifetime, request.isolation) as session,
        ):
            compiled = None
            if lang.compile:
                compiled = self._command(session, (*limit, *lang.compile), request.compile_timeout_s, b"")
                if compiled.status != "Finished" or compiled.return_code != 0:
                    return self._result(compiled, None, session, fetch)
            # A limited program starts as its argv says (the warm interpreter's fork would
            # inherit the runner's limits, not the request's).
            python = lang.source if lang.warm_python and not limit else ""
            run = (*limit, *lang.run)
            ran = self._command(session, run, request.run_timeout_s, request.stdin, python=python)
            return self._result(compiled, ran, session, fetch)
        return failed[0]

    def run_jupyter(self, tenant: Tenant, request: JupyterRequest) -> CodeResult:
        """Run ``request.cells`` in order in one Python process; a cell's error stops the run.

        Raises:
            InvalidRequest, SessionLimit, Draining, IsolationUnavailable: as :meth:`run_code`.
        """
        self._check_timeout(request.total_timeout_s, "total_timeout")
        if request.cell_timeout_s:
            self._check_timeout(request.cell_timeout_s, "cell_timeout")
        if not request.cells:
            raise InvalidRequest("cells is empty: give at least one cell")
        self._check_size(sum(len(c.encode("utf-8", "replace")) for c in request.cells))
        fetch = self._fetch_names(request.fetch_files)
        files = self._files(request.files)
        cap = self.sessions.policy.output_cap(0)
        spec = {
            "cells": list(request.cells),
            "cell_timeout": request.cell_timeout_s,
            "out": _CELLS_PATH,
            "cap": cap,
        }
        with (
            self._infra_errors() as failed,
            self._session(tenant, files, request.total_timeout_s + 60.0, request.isolation) as session,
        ):
            session.box.write_path(_DRIVER_PATH, _DRIVER.encode("utf-8"))
            argv = ("python3", _DRIVER_PATH)
            driver = self._command(session, argv, request.total_timeout_s, json.dumps(spec).encode("utf-8"))
            cells = _parse_cells(self._read(session, _CELLS_PATH, 8 * cap + MiB) or b"")
            ok = (
                driver.status == "Finished" and driver.return_code == 0 and not any(c["error"] for c in cells)
            )
            if driver.status == "Finished" and driver.return_code != 0 and not any(c["error"] for c in cells):
                log.info(
                    "coderun.jupyter_driver_failed", code=driver.return_code, stderr=driver.stderr[-300:]
                )
            return CodeResult(
                status="Success" if ok else "Failed",
                run=driver,
                cells=cells,
                files=self._fetch(session, fetch),
                executor=self.host_id,
                container_runtime=self._runtime_of(session),
            )
        return failed[0]

    # -- internals ---------------------------------------------------------------------------

    def _language(self, name: str) -> Language:
        if name not in self.config.languages:
            known = "not offered by this host's image" if name in LANGUAGES else "unknown"
            raise InvalidRequest(
                f"language {name[:40]!r} is {known}: host {self.host_id} runs "
                f"{', '.join(self.config.languages)} (image {self.config.image})"
            )
        return LANGUAGES[name]

    def _check_timeout(self, value: float, name: str) -> None:
        if (
            not (isinstance(value, int | float) and math.isfinite(value))
            or not 0 < value <= self.config.max_timeout_s
        ):
            raise InvalidRequest(
                f"{name} must be a number of seconds in (0, {self.config.max_timeout_s:g}], got {value!r}"
            )

    def _rlimits(self, memory_mb: int) -> tuple[str, ...]:
        """The argv prefix that applies ``memory_mb`` as SandboxFusion does (RLIMIT_AS, DATA and
        STACK on the compile and the run), never above the container's own memory limit."""
        if memory_mb <= 0:
            return ()
        cap = min(memory_mb * MiB, self.sessions.policy.base_spec.memory_bytes)
        return ("prlimit", f"--as={cap}", f"--data={cap}", f"--stack={cap}", "--")

    def _check_size(self, size: int) -> None:
        if size > self.config.max_code_bytes:
            raise InvalidRequest(f"code of {size} bytes exceeds this host's {self.config.max_code_bytes}")

    def _files(self, files: Sequence[tuple[str, bytes]]) -> tuple[tuple[str, bytes], ...]:
        if len(files) > self.config.max_files:
            raise InvalidRequest(f"at most {self.config.max_files} files, got {len(files)}")
        return tuple((check_relative_name(name, what="files name"), data) for name, data in files)

    def _fetch_names(self, names: Sequence[str]) -> tuple[str, ...]:
        if len(names) > self.config.max_files:
            raise InvalidRequest(f"at most {self.config.max_files} fetch_files, got {len(names)}")
        for name in names:
            check_relative_name(name, what="fetch_files name")
        return tuple(names)

    @contextlib.contextmanager
    def _infra_errors(self) -> Iterator[list[CodeResult]]:
        """Turns the sandbox's own failures into a ``SandboxError`` result (appended to the
        yielded list); refusals (InvalidRequest, SessionLimit, Draining, IsolationUnavailable)
        go to the caller: nothing ran."""
        failed: list[CodeResult] = []
        try:
            yield failed
        except (SessionLimit, Draining, IsolationUnavailable):
            raise
        except InfraError as exc:
            log.warning("coderun.sandbox_error", host=self.host_id, error=str(exc)[:300])
            failed.append(
                CodeResult(
                    status="SandboxError",
                    message=f"{exc.__class__.__name__}: {exc}"[:2000],
                    executor=self.host_id,
                )
            )

    @contextlib.contextmanager
    def _session(
        self, tenant: Tenant, files: Sequence[tuple[str, bytes]], lifetime_s: float, isolation: str
    ) -> Iterator[Session]:
        request = SessionRequest(
            image=self.config.image,
            files=tuple(files),
            max_lifetime_s=lifetime_s,
            idle_ttl_s=lifetime_s,
            labels={"api": "coderun"},
            workspace_exec=True,  # compiled programs run from it
            isolation=isolation,
        )
        session = self.sessions.create(tenant, request)
        try:
            yield session
        finally:
            # Costs the caller nothing: the pool resets (or removes) the container on a
            # thread of its own, and the tenant's next code run takes it once it is clean.
            self.sessions.destroy(tenant, session.id)

    def _command(
        self, session: Session, argv: Sequence[str], timeout_s: float, stdin: bytes, *, python: str = ""
    ) -> CommandResult:
        out: list[list[bytes]] = [[], [], []]
        t0 = time.monotonic()
        outcome = self.sessions.exec(
            session,
            list(argv),
            on_output=lambda fd, data: out[fd if fd in (1, 2) else 2].append(data),
            timeout_s=timeout_s,
            stdin=stdin,
            python=python,
        )
        elapsed = time.monotonic() - t0
        return _command_result(outcome, b"".join(out[1]), b"".join(out[2]), elapsed, self.host_id)

    def _result(
        self,
        compiled: CommandResult | None,
        ran: CommandResult | None,
        session: Session,
        fetch: tuple[str, ...],
    ) -> CodeResult:
        steps = [r for r in (compiled, ran) if r is not None]
        ok = all(r.status == "Finished" and r.return_code == 0 for r in steps)
        broken = [r.stderr for r in steps if r.status == "Error"]  # the host's fault: no verdict
        return CodeResult(
            status="SandboxError" if broken else "Success" if ok else "Failed",
            message=broken[0] if broken else "",
            compile=compiled,
            run=ran,
            files=self._fetch(session, fetch),
            executor=self.host_id,
            container_runtime=self._runtime_of(session),
        )

    def _runtime_of(self, session: Session) -> str:
        return self.sessions.runtime.runtime_name(session.spec)

    def _fetch(self, session: Session, names: tuple[str, ...]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for name in names:
            data = self._read(session, name, self.config.max_fetch_bytes)
            if data is not None:
                found[name] = data
        return found

    def _read(self, session: Session, path: str, max_bytes: int) -> bytes | None:
        """A file of the container, ``None`` when it is missing, not a file or too large (as
        SandboxFusion leaves out what it cannot fetch)."""
        try:
            return session.box.read_path(path, max_bytes=max_bytes)
        except SandboxFileError:
            return None


def _command_result(
    outcome: ExecOutcome, stdout: bytes, stderr: bytes, elapsed: float, host: str
) -> CommandResult:
    if outcome.spawn_error:
        # The toolchain is not in the image: the host's fault, not the program's.
        return CommandResult(
            status="Error", stderr=f"cannot start it on host {host}: {outcome.spawn_message}"
        )
    err = stderr.decode("utf-8", "replace")
    if outcome.output_limit_exceeded:
        err += "\n[skillopt: the program was killed: its output passed this host's cap]\n"
    if outcome.oom_killed:
        err += "\n[skillopt: the program was killed: out of memory]\n"
    code = outcome.exit_code if outcome.exit_code is not None else -(outcome.signal or 9)
    return CommandResult(
        status="TimeLimitExceeded" if outcome.timed_out else "Finished",
        execution_time_s=round(outcome.duration_s or elapsed, 6),
        return_code=None if outcome.timed_out else code,
        stdout=stdout.decode("utf-8", "replace"),
        stderr=err,
    )


def _parse_cells(data: bytes) -> list[dict[str, object]]:
    """The driver's cell results (a line the code garbled ends the list)."""
    cells: list[dict[str, object]] = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            cell = json.loads(line)
        except ValueError:
            break
        if not isinstance(cell, dict):
            break
        cells.append(
            {
                "stdout": str(cell.get("stdout", "")),
                "stderr": str(cell.get("stderr", "")),
                "display": [d for d in cell.get("display", []) if isinstance(d, dict)],
                "error": [e for e in cell.get("error", []) if isinstance(e, dict)],
            }
        )
    return cells
