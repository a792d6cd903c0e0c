"""Fresh grading sandboxes on the fleet: ``skillopt score --endpoints`` grades code in sessions.

The same contract as :func:`sandbox.runtime.fresh.local_grading_sandboxes` (a factory of fresh,
network-less sandboxes, each used once), served by sandbox sessions on remote hosts instead of
the local Docker engine. The program runs in the session; its claims are read back and judged
here, on the trusted side, exactly as with local containers.

Usage::

    with fleet_grading_sandboxes(where) as fresh:
        with fresh() as box:                      # a new session, destroyed afterwards
            box.write_file("x.py", b"print(1)")
            box.run_python("x.py", timeout_s=10)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager

from controller.client.sandbox_client import SandboxClient
from controller.client.sessions import SandboxSession, SessionEndpoints
from skillopt.agents.sandbox import ExecOutcome, FileEntry
from skillopt.errors import (
    OutputLimitExceeded,
    SandboxFileRefused,
    SandboxFileTooLarge,
    SandboxPermissionDenied,
    SandboxUnavailable,
    SkillOptError,
)
from skillopt.files import check_relative_name

__all__ = ["SessionGradingSandbox", "fleet_grading_sandboxes"]

#: Labels of a grading session (``skillopt sandbox ls`` shows what it is for).
LABELS = {"purpose": "grading"}


class SessionGradingSandbox:
    """:class:`skillopt.agents.sandbox.Sandbox` over one remote sandbox session, for grading
    (paths relative to the session's workdir; absolute ones and ``..`` refused).

    One difference from a container leased on the trusted side: the session reads a file as
    any program in it would, so a link is followed, inside the session's own container (what
    it reads there, the program could have written to the path itself). A directory, or a
    file the session's user may not read, raises :class:`SandboxFileRefused` as the contract
    says.
    """

    def __init__(self, session: SandboxSession, *, output_limit_bytes: int) -> None:
        self.session = session
        self.output_limit_bytes = output_limit_bytes

    def write_file(self, path: str, data: bytes) -> None:
        self.session.write_file(check_relative_name(path), data)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        name = check_relative_name(path)
        try:
            return self.session.read_file(name, max_bytes=max_bytes)
        except SandboxFileTooLarge as exc:
            raise OutputLimitExceeded(f"{name}: larger than {max_bytes} bytes") from exc
        except SandboxPermissionDenied as exc:  # a pipe, a socket, a file not the user's
            raise SandboxFileRefused(f"{name}: not a readable regular file ({exc.message})") from exc

    def list_files(self, *, max_files: int = 1000) -> list[FileEntry]:
        out = self.run_command(["find", ".", "-type", "f", "-printf", "%P\\t%s\\n"], timeout_s=60.0)
        entries = []
        for line in out.stdout_tail.splitlines()[:max_files]:
            name, _, size = line.rpartition("\t")
            if name and size.isdigit():
                entries.append(FileEntry(path=name, size_bytes=int(size)))
        return entries

    def run_python(
        self, path: str, *, args: Sequence[str] = (), timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecOutcome:
        return self.run_command(["python3", path, *args], timeout_s=timeout_s, env=env)

    def run_command(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        output_limit_bytes: int | None = None,
    ) -> ExecOutcome:
        limit = output_limit_bytes or self.output_limit_bytes
        r = self.session.exec(argv, input=stdin, env=env, timeout=timeout_s, output_limit_bytes=limit)
        return ExecOutcome(
            exit_code=r.exit_code,
            stdout_tail=r.stdout[-limit:].decode("utf-8", "replace"),
            stderr_tail=r.stderr[-limit:].decode("utf-8", "replace"),
            stdout_bytes=len(r.stdout),
            stderr_bytes=len(r.stderr),
            duration_s=r.duration_s,
            timed_out=r.timed_out,
            oom_killed=r.oom_killed,
            signal=r.signal or None,
            output_limit_exceeded=r.output_limit_exceeded,
            spawn_error=r.spawn_error,
            spawn_message=r.message,
        )


@contextlib.contextmanager
def fleet_grading_sandboxes(
    where: SessionEndpoints, *, image: str = "", output_limit_bytes: int = 256 * 1024
) -> Iterator[Callable[[], AbstractContextManager[SessionGradingSandbox]]]:
    """A factory of fresh grading sandboxes, each a new session on the best host of ``where``.

    Raises:
        SandboxUnavailable: no host answers (each host and why, as a connection failure says).
    """
    _require_a_host(where)

    @contextlib.contextmanager
    def fresh() -> Iterator[SessionGradingSandbox]:
        session = SandboxSession.create(where, image=image, labels=LABELS)
        try:
            yield SessionGradingSandbox(session, output_limit_bytes=output_limit_bytes)
        finally:
            with contextlib.suppress(SkillOptError):  # a host that is gone took it along
                session.destroy()

    yield fresh


def _require_a_host(where: SessionEndpoints) -> None:
    """Fail now, naming every host and why, rather than once per sample."""
    reasons: list[str] = []
    for channel in where.channels():
        with SandboxClient(channel) as client:
            try:
                client.describe(timeout_s=10.0)
                return
            except SkillOptError as exc:
                reasons.append(exc.message)
    raise SandboxUnavailable(
        f"no sandbox host answers ({', '.join(where.endpoints)}): "
        + ("; ".join(reasons) or "no address behind the names")
    )
