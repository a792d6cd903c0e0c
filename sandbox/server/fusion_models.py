"""SandboxFusion's request and answer shapes (``RunCodeRequest``, ``RunJupyterRequest`` and their
responses, bytedance/SandboxFusion ``sandbox/server/sandbox_api.py``) as pydantic models, and
their translation to and from :mod:`sandbox.service.coderun`'s domain values.

Both the host's listener (:mod:`sandbox.server.fusion_http`) and the fleet's front
(:mod:`controller.fleet.http_front`) check a request with these models, so a request the front
passes on has the shape the host expects.

Types are checked strictly (as the hand-written checks before them did): ``"10"`` is no
timeout and ``true`` no number; an integer is a float. Fields a client sends beyond these are
ignored, as SandboxFusion ignores them. The body is decoded by :func:`json.loads` before the
model sees it, like SandboxFusion's own server (FastAPI): ``NaN`` and lone surrogates parse, and
the runner then refuses or replaces them as before. Bounds (timeouts, sizes, names) are the
runner's (:class:`~sandbox.service.coderun.CodeRunner`), one place for every entry point.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sandbox.service.coderun import CodeRequest, CodeResult, CommandResult, JupyterRequest
from skillopt.errors import InvalidRequest

__all__ = [
    "ROUTES",
    "CommandRunResult",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunJupyterRequest",
    "RunJupyterResponse",
    "answer_of",
    "parse_request",
    "sandbox_error",
]


class _Request(BaseModel):
    """What both routes take besides their own fields."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore")

    #: Path (relative to the working directory) → base64 content; ``None`` skips the file.
    files: dict[str, str | None] = Field(default_factory=dict)
    #: Paths to send back, base64 (a missing one is left out).
    fetch_files: list[str] = Field(default_factory=list)
    #: Ours, beside SandboxFusion's: ``""`` (any) or ``"gvisor"`` (:mod:`skillopt.isolation`).
    isolation: str = ""

    def decoded_files(self) -> tuple[tuple[str, bytes], ...]:
        """``files`` decoded (a ``None`` content skipped, as SandboxFusion does).

        Raises:
            InvalidRequest: a content that is not valid base64.
        """
        decoded = []
        for name, content in self.files.items():
            if content is None:
                continue
            try:
                decoded.append((name, base64.b64decode(content, validate=True)))
            except (binascii.Error, ValueError):
                raise InvalidRequest(f"files[{name[:60]!r}] is not valid base64") from None
        return tuple(decoded)


class RunCodeRequest(_Request):
    """``POST /run_code``: one program, compiled when its language has a step, then run."""

    code: str
    language: str
    compile_timeout: float = 10.0
    run_timeout: float = 10.0
    stdin: str | None = None
    #: SandboxFusion's rlimits of the compile and the run (MiB; 0 or less: none).
    memory_limit_MB: int = -1

    def to_domain(self) -> CodeRequest:
        """The runner's request (text as UTF-8, a lone surrogate replaced).

        Raises:
            InvalidRequest: invalid base64 in ``files``.
        """
        return CodeRequest(
            language=self.language,
            code=self.code.encode("utf-8", "replace"),
            compile_timeout_s=self.compile_timeout,
            run_timeout_s=self.run_timeout,
            stdin=self.stdin.encode("utf-8", "replace") if self.stdin else b"",
            files=self.decoded_files(),
            fetch_files=tuple(self.fetch_files),
            memory_limit_mb=self.memory_limit_MB,
            isolation=self.isolation,
        )


class RunJupyterRequest(_Request):
    """``POST /run_jupyter``: cells run in order in one Python process."""

    cells: list[str]
    cell_timeout: float = 0.0
    total_timeout: float = 45.0
    kernel: Literal["python3"] = "python3"

    def to_domain(self) -> JupyterRequest:
        """The runner's request.

        Raises:
            InvalidRequest: invalid base64 in ``files``.
        """
        return JupyterRequest(
            cells=tuple(self.cells),
            cell_timeout_s=self.cell_timeout,
            total_timeout_s=self.total_timeout,
            files=self.decoded_files(),
            fetch_files=tuple(self.fetch_files),
            isolation=self.isolation,
        )


class CommandRunResult(BaseModel):
    """One command's result (the compile, the run, or a notebook's driver)."""

    status: str  # Finished, TimeLimitExceeded, Error
    execution_time: float | None = None  # seconds
    cpu_time: float | None = None  # never measured here
    return_code: int | None = None  # a signal's kill is its negative number
    stdout: str | None = None
    stderr: str | None = None

    @classmethod
    def of(cls, result: CommandResult | None) -> CommandRunResult | None:
        if result is None:
            return None
        return cls(
            status=result.status,
            execution_time=result.execution_time_s,
            return_code=result.return_code,
            stdout=result.stdout,
            stderr=result.stderr,
        )


class _Response(BaseModel):
    status: str  # Success, Failed, SandboxError
    message: str = ""


class RunCodeResponse(_Response):
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str = ""  # the host's id
    files: dict[str, str] = Field(default_factory=dict)
    #: Ours: the OCI runtime the container ran under ("" when no container was had).
    container_runtime: str = ""


class RunJupyterResponse(_Response):
    driver: CommandRunResult | None = None
    cells: list[dict[str, Any]] = Field(default_factory=list)
    executor_pod_name: str = ""
    files: dict[str, str] = Field(default_factory=dict)
    container_runtime: str = ""


#: The routes a POST may take, and the shape of each one's request.
ROUTES: dict[str, type[RunCodeRequest] | type[RunJupyterRequest]] = {
    "/run_code": RunCodeRequest,
    "/run_jupyter": RunJupyterRequest,
}

_Model = TypeVar("_Model", bound=BaseModel)


def parse_request(model: type[_Model], body: bytes) -> _Model:
    """``body`` checked against ``model``.

    Raises:
        InvalidRequest: not JSON, not an object, a field missing or of the wrong type (the
            message names each such field).
    """
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise InvalidRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidRequest("the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"{'.'.join(str(p) for p in e['loc'])[:80]}: {e['msg']}" for e in exc.errors(include_url=False)
        ]
        raise InvalidRequest("; ".join(problems[:5])) from None


def _files_out(files: dict[str, bytes]) -> dict[str, str]:
    return {name: base64.b64encode(data).decode("ascii") for name, data in files.items()}


def answer_of(route: str, result: CodeResult) -> RunCodeResponse | RunJupyterResponse:
    """The route's response to the runner's ``result``."""
    common: dict[str, Any] = {
        "status": result.status,
        "message": result.message,
        "executor_pod_name": result.executor,
        "files": _files_out(result.files),
        "container_runtime": result.container_runtime,
    }
    if route == "/run_jupyter":
        return RunJupyterResponse(driver=CommandRunResult.of(result.run), cells=result.cells, **common)
    return RunCodeResponse(
        compile_result=CommandRunResult.of(result.compile),
        run_result=CommandRunResult.of(result.run),
        **common,
    )


def sandbox_error(route: str, message: str, executor: str) -> RunCodeResponse | RunJupyterResponse:
    """A ``SandboxError`` answer in the route's shape (nothing ran, or nothing is known)."""
    return answer_of(route, CodeResult(status="SandboxError", message=message, executor=executor))
