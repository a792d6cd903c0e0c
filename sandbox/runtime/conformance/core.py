"""The suite's frame: :class:`Conformance` (what the checks run against), the registry
:data:`CHECKS` and the helpers the checks share."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace

from sandbox.runtime.base import RolloutSandbox, SandboxHandle, SandboxRuntime, SessionSandbox
from sandbox.runtime.spec import ContainerSpec

__all__ = ["CHECKS", "Check", "Conformance"]


class Conformance:
    """What the checks run against: a runtime, a spec, and one shared sandbox.

    ``box(**lease_kw)`` leases the shared sandbox (created on first use) with the given lease
    settings, in a fresh workspace directory of its own; ``fresh(**lease_kw)`` creates (and
    afterwards destroys) a sandbox of its own, for checks that kill or exhaust it;
    ``session()`` does the same for a sandbox driven as a session (its background processes
    and files outside the workspace must not meet other checks); ``own()`` gives a sandbox of
    its own as a handle, for checks that lease it again after a reset. ``close()`` removes the
    shared one.
    """

    def __init__(self, runtime: SandboxRuntime, spec: ContainerSpec) -> None:
        self.runtime = runtime
        self.spec = spec
        self._shared: SandboxHandle | None = None
        self._n = 0

    @contextlib.contextmanager
    def box(self, **kw) -> Iterator[RolloutSandbox]:
        if self._shared is None or not self.runtime.alive(self._shared):
            self._shared = self.runtime.create(self.spec)
        self._n += 1
        shared = self.runtime.lease(self._shared, "conformance/shared", **kw)
        yield _Subdir(shared, f"c{self._n}")

    @contextlib.contextmanager
    def fresh(self, **kw) -> Iterator[RolloutSandbox]:
        handle = self.runtime.create(self.spec)
        try:
            yield self.runtime.lease(handle, "conformance/fresh", **kw)
        finally:
            self.runtime.destroy(handle)

    @contextlib.contextmanager
    def own(self) -> Iterator[SandboxHandle]:
        """A sandbox of its own, as a handle (checks that lease it several times, with a reset
        between), destroyed afterwards."""
        handle = self.runtime.create(self.spec)
        try:
            yield handle
        finally:
            self.runtime.destroy(handle)

    @contextlib.contextmanager
    def session(self) -> Iterator[SessionSandbox]:
        handle = self.runtime.create(self.spec)
        try:
            yield self.runtime.lease(handle, "session/conformance", output_limit_bytes=1 << 20)
        finally:
            self.runtime.destroy(handle)

    def close(self) -> None:
        if self._shared is not None:
            self.runtime.destroy(self._shared)
            self._shared = None


class _Subdir(RolloutSandbox):
    """A leased sandbox whose workspace paths and working directory are one subdirectory, so
    checks sharing a sandbox never see each other's files."""

    def __init__(self, box: RolloutSandbox, sub: str) -> None:
        self._box, self._sub = box, sub
        box.write_file(f"{sub}/.keep", b"")

    def _p(self, path: str) -> str:
        return f"{self._sub}/{path}" if path and not path.startswith(("/", "\\")) else path

    def run_command(self, argv, *, timeout_s, env=None, stdin=None, output_limit_bytes=None):
        if not argv:
            return self._box.run_command(argv, timeout_s=timeout_s)
        script = 'cd "$0" && exec "$@"'
        return self._box.run_command(
            ["sh", "-c", script, self._sub, *argv],
            timeout_s=timeout_s,
            env=env,
            stdin=stdin,
            output_limit_bytes=output_limit_bytes,
        )

    def run_python(self, path, *, args=(), timeout_s, env=None):
        return self._box.run_python(self._p(path), args=args, timeout_s=timeout_s, env=env)

    def read_file(self, path, *, max_bytes):
        return self._box.read_file(self._p(path), max_bytes=max_bytes)

    def write_file(self, path, data):
        self._box.write_file(self._p(path), data)

    def list_files(self, *, max_files=1000):
        prefix = self._sub + "/"
        return [
            replace(f, path=f.path[len(prefix) :])
            for f in self._box.list_files(max_files=max_files)
            if f.path.startswith(prefix) and f.path != prefix + ".keep"
        ]

    def write_skill(self, skill, *, version=""):
        self._box.write_skill(skill, version=version)

    def kill(self):
        self._box.kill()

    def remaining_s(self):
        return self._box.remaining_s()


Check = Callable[[Conformance], None]
CHECKS: dict[str, Check] = {}


def _check(fn: Check) -> Check:
    CHECKS[fn.__name__.removeprefix("check_")] = fn
    return fn


def _raises(
    kind: type[BaseException] | tuple[type[BaseException], ...], fn: Callable[[], object]
) -> BaseException:
    try:
        value = fn()
    except kind as exc:
        return exc
    raise AssertionError(f"expected {kind}, got a return value {value!r:.200}")
