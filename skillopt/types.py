"""Frozen domain data shared by the trainer, the envs, the sandbox service and the controller.

Everything here is plain, immutable data with no third-party imports. The sandbox's gRPC layer
converts these to and from protobuf messages at its edge (``sandbox/api/convert.py``); nothing
else in the project sees protobuf.

Units are in the field names (``_s`` seconds, ``_bytes`` bytes). Empty collections and ``None``
mean "not given" unless a field says otherwise.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MODEL_ERROR_KINDS",
    "CaseResult",
    "ExecRecord",
    "File",
    "Grading",
    "HostDescription",
    "InfraErrorKind",
    "InfraFailure",
    "Limits",
    "Message",
    "ModelSpec",
    "RolloutRequest",
    "RolloutResult",
    "SkillFile",
    "SkillVersion",
    "Task",
    "TestCase",
    "Trace",
    "Usage",
    "WorkOutcome",
    "skill_hash",
    "skill_manifest",
]


def skill_hash(content: str) -> str:
    """Short hash of a text (first 16 hex chars of SHA-256): what the optimizer's caches and the
    step records (``candidate_hash``) name a version's packed text by. A version itself is named
    by its :attr:`SkillVersion.tree_sha256`."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True, slots=True)
class File:
    """A named file travelling with a request or result. ``name`` is a relative POSIX path."""

    name: str
    content: bytes


@dataclass(frozen=True, kw_only=True, slots=True)
class TestCase:
    """One test case of a task: its files (inputs on the task side, gold on the grading side)."""

    __test__ = False  # not a pytest class

    name: str
    files: tuple[File, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Task:
    """What the agent may see: instruction, env-specific attributes and input files per case."""

    id: str
    instruction: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    cases: tuple[TestCase, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Grading:
    """What only the trusted grader sees: gold files per case and gold answers.

    Never written into a rollout container.
    """

    attributes: Mapping[str, Any] = field(default_factory=dict)
    cases: tuple[TestCase, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class SkillFile:
    """One file of a skill package besides SKILL.md (``scripts/…``, ``references/…``,
    ``assets/…``). ``path`` is relative POSIX, checked by :mod:`skillopt.skill.package`."""

    path: str
    data: bytes
    executable: bool = False
    _sha256: str = field(default="", init=False, repr=False, compare=False)

    @property
    def sha256(self) -> str:
        """SHA-256 of ``data``, computed once (on first use)."""
        if not self._sha256:
            object.__setattr__(self, "_sha256", hashlib.sha256(self.data).hexdigest())
        return self._sha256


def skill_manifest(skill_md_sha256: str, files: Iterable[tuple[str, str, bool]]) -> bytes:
    """:meth:`SkillVersion.manifest` from hashes already known: SKILL.md's, and ``(path, sha256,
    executable)`` per other file in any order (the wire's content addressing names files by
    hash, so neither side hashes a package twice)."""
    lines = [f"{skill_md_sha256} 644 SKILL.md"]
    lines += [f"{sha} {'755' if executable else '644'} {path}" for path, sha, executable in sorted(files)]
    return ("\n".join(lines) + "\n").encode("utf-8")


@dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class SkillVersion:
    """One version of a skill, as the agent receives it: an Agent Skills package. The one value
    every holder of a skill takes (the trainer's state, the rollouts, the run directory, the
    selection cache, the wire's content addressing, the sandbox that mounts it).

    ``content`` is the text of SKILL.md (mounted as ``/skill/SKILL.md``); ``files`` are the
    package's other files, kept sorted by path (empty: a one-file skill, as every skill was
    before packages). ``name`` is the package's folder name where the agent CLIs discover it.

    Its hashes are computed once, on first use, inside it (:attr:`sha256`,
    :attr:`tree_sha256`): nobody outside memoises them. Two versions are equal when they have
    the same name and tree hash (the same SKILL.md and files). The text the optimizer model
    reads and writes is a view of it made at that edge (:mod:`skillopt.skill.packed`), as the
    proto is at the wire's (``sandbox/api/convert_skill.py``).
    """

    name: str = "skillopt-target"
    content: str = ""
    files: tuple[SkillFile, ...] = ()
    _sha256: str = field(default="", init=False, repr=False)
    _tree_sha256: str = field(default="", init=False, repr=False)

    def __post_init__(self) -> None:
        files = tuple(self.files)
        if any(a.path > b.path for a, b in itertools.pairwise(files)):
            files = tuple(sorted(files, key=lambda f: f.path))
        object.__setattr__(self, "files", files)

    @property
    def sha256(self) -> str:
        """SHA-256 of SKILL.md alone (computed once)."""
        if not self._sha256:
            object.__setattr__(self, "_sha256", hashlib.sha256(self.content.encode("utf-8")).hexdigest())
        return self._sha256

    def manifest(self) -> bytes:
        """The package's canonical listing: one line ``<sha256> <mode> <path>`` per file,
        SKILL.md first then by path (mode ``755`` for executables, else ``644``). Its hash
        names the whole version (:attr:`tree_sha256`)."""
        return skill_manifest(self.sha256, ((f.path, f.sha256, f.executable) for f in self.files))

    @property
    def tree_sha256(self) -> str:
        """SHA-256 of :meth:`manifest` (computed once): equal packages have equal tree hashes."""
        if not self._tree_sha256:
            object.__setattr__(self, "_tree_sha256", hashlib.sha256(self.manifest()).hexdigest())
        return self._tree_sha256

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SkillVersion):
            return NotImplemented
        return self is other or (self.name == other.name and self.tree_sha256 == other.tree_sha256)

    def __hash__(self) -> int:
        return hash((self.name, self.tree_sha256))


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelSpec:
    """Which model an agent calls. Holds no secrets: ``provider`` names a profile configured on
    the side that makes the call (the sandbox service for targets), which owns URL and key."""

    provider: str
    model: str
    temperature: float | None = None
    max_output_tokens: int | None = None
    reasoning_effort: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: Send prompt-caching hints (``model.prompt_caching``; see ``ChatRequest.cache_key``).
    prompt_caching: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """Resource limits of one rollout. ``None`` means the host's default."""

    wall_time_s: float | None = None
    max_turns: int | None = None
    exec_timeout_s: float | None = None
    memory_bytes: int | None = None
    cpus: float | None = None
    output_bytes: int | None = None
    max_model_tokens: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RolloutRequest:
    """One rollout: run ``agent`` of ``env`` on ``task`` with ``skill``, grade with ``grading``.

    ``rollout_id`` is the idempotency key: a host that already has this id never runs it twice.
    """

    rollout_id: str
    env: str
    agent: str
    task: Task
    grading: Grading
    skill: SkillVersion
    model: ModelSpec
    limits: Limits = field(default_factory=Limits)
    use_eval_feedback: bool = False
    diagnostic_instruction: str = ""
    #: Model exchange cache mode: ``off``, ``record``, ``replay``; "" = the host's default.
    model_cache: str = ""
    #: The target's sampling seed (0 = none): every model call of the rollout carries it as
    #: the ``X-Skillopt-Seed`` header (real providers ignore it; the simulation samples by it).
    seed: int = 0
    #: The isolation the caller requires of the rollout's container ("" = any, ``gvisor``): a
    #: host that cannot give it refuses the rollout before any container starts.
    isolation: str = ""


class WorkOutcome(enum.StrEnum):
    """What a failure did to the work it ended: the one input of "will it be tried again?".

    Every error (:class:`skillopt.errors.SkillOptError` ``outcome``) and every typed failure on
    a row (:attr:`InfraFailure.outcome`) says which; the fleet's retry policy
    (``controller.fleet.policy``) decides from it alone, with the attempts used.
    """

    #: Nothing ran: the host was full, draining or never reached, or refused the request at
    #: the door for a reason another host or a later moment may not have. Taking the work
    #: elsewhere (or later) costs it no attempt.
    NOT_STARTED = "not_started"
    #: The work started and was lost without a verdict (the host died under it, its container
    #: did not start, the model provider failed): another attempt with the same ``rollout_id``
    #: may succeed, and the id makes it safe (a host never runs an id twice).
    LOST = "lost"
    #: The last word: a verdict (a timeout, an OOM kill), a refusal any attempt would meet (bad
    #: request, rejected credential, missing image), or a cancellation by the caller.
    FINAL = "final"

    @classmethod
    def of_retryable(cls, retryable: bool | None) -> WorkOutcome:
        """Started work that another attempt may finish (``LOST``) or not (``FINAL``): what a
        bare ``retryable`` flag means (a model error's mapping, an older host's rows and
        statuses, rows stored before outcomes existed)."""
        return cls.LOST if retryable else cls.FINAL


class InfraErrorKind(enum.StrEnum):
    """Infrastructure failures: the environment, not the skill, failed. Never scored."""

    OOM_KILLED = "oom_killed"
    TIMEOUT = "timeout"
    CONTAINER_START_FAILED = "container_start_failed"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
    IMAGE_MISSING = "image_missing"
    GATEWAY_ERROR = "gateway_error"
    MODEL_UNAVAILABLE = "model_unavailable"
    CANCELLED = "cancelled"
    INTERNAL = "internal"
    REPLAY_MISS = "replay_miss"
    #: The model provider rejected the credential (401/403).
    MODEL_AUTH = "model_auth"
    #: The model provider kept answering 429.
    MODEL_RATE_LIMITED = "model_rate_limited"
    #: The model provider refused the request (400, 404, 422 ...).
    MODEL_BAD_REQUEST = "model_bad_request"


#: Kinds that mean the model provider failed (not the sandbox): their fail_reason is
#: ``model-<what>: ...`` rather than ``infra-<kind>: ...``.
MODEL_ERROR_KINDS = frozenset(
    {
        InfraErrorKind.MODEL_AUTH,
        InfraErrorKind.MODEL_RATE_LIMITED,
        InfraErrorKind.MODEL_BAD_REQUEST,
        InfraErrorKind.MODEL_UNAVAILABLE,
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class InfraFailure:
    """A typed infrastructure failure attached to a result instead of a score. ``outcome``
    says what happened to the work (the default, ``FINAL``, is never retried)."""

    kind: InfraErrorKind
    message: str
    outcome: WorkOutcome = WorkOutcome.FINAL

    @property
    def is_retryable(self) -> bool:
        """Whether another attempt may succeed (what the wire's and the row JSON's
        ``retryable`` say): any outcome but ``FINAL``."""
        return self.outcome is not WorkOutcome.FINAL

    @property
    def fail_reason(self) -> str:
        """The row's ``fail_reason`` for this error: ``model-auth: ...`` for the model kinds,
        ``infra-<kind>: ...`` for the others (the prefix before ":" groups failures)."""
        if self.kind in MODEL_ERROR_KINDS:
            return f"{self.kind.value.replace('_', '-')}: {self.message}"
        return f"infra-{self.kind.value}: {self.message}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Message:
    """One conversation element. ``role`` is system/user/assistant/tool; ``tool_calls`` holds
    provider-neutral dicts ``{id, name, arguments}``."""

    role: str
    content: str
    name: str = ""
    tool_call_id: str = ""
    tool_calls: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class ExecRecord:
    """One execution inside the rollout container, as the trace keeps it."""

    turn: int
    case: str
    code: str
    exit_code: int | None
    stdout_tail: str
    stderr_tail: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Trace:
    """What happened during a rollout: the conversation, executions and prompts."""

    messages: tuple[Message, ...] = ()
    executions: tuple[ExecRecord, ...] = ()
    system_prompt: str = ""
    user_prompt: str = ""
    code: str = ""
    notes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class Usage:
    """Token usage of model calls, per stage (e.g. ``rollout``) and in total.

    ``prompt_tokens`` counts every input token; of them, ``cached_input_tokens`` were read from
    the provider's prompt cache (OpenAI ``prompt_tokens_details.cached_tokens`` / Responses
    ``input_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``) and
    ``cache_write_input_tokens`` were written to it (Anthropic ``cache_creation_input_tokens``);
    both are priced apart (:class:`skillopt.models.roles.PriceTable`).
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens + other.cache_write_input_tokens,
        )

    def __sub__(self, other: Usage) -> Usage:
        return Usage(
            calls=self.calls - other.calls,
            prompt_tokens=self.prompt_tokens - other.prompt_tokens,
            completion_tokens=self.completion_tokens - other.completion_tokens,
            cached_input_tokens=self.cached_input_tokens - other.cached_input_tokens,
            cache_write_input_tokens=self.cache_write_input_tokens - other.cache_write_input_tokens,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, int]:
        """The JSON form (every file that records usage): the cache counts only when not 0,
        so usage without caching keeps the shape it always had (absent = 0)."""
        out = {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }
        if self.cached_input_tokens:
            out["cached_input_tokens"] = self.cached_input_tokens
        if self.cache_write_input_tokens:
            out["cache_write_input_tokens"] = self.cache_write_input_tokens
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Inverse of :meth:`to_dict` (missing counts are 0).

        Raises:
            ValueError, TypeError: a count that is not a whole number.
        """
        return cls(
            calls=int(data.get("calls", 0)),
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            cached_input_tokens=int(data.get("cached_input_tokens", 0)),
            cache_write_input_tokens=int(data.get("cache_write_input_tokens", 0)),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseResult:
    """Grading outcome of one test case. ``stage`` is where it ended: exec, output, eval."""

    name: str
    ok: bool
    stage: str
    reason: str = ""
    report: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class RolloutResult:
    """The row the trainer needs, plus trace, artifacts and provenance.

    ``hard`` and ``soft`` are in [0, 1]. When ``infra_error`` is set the scores mean nothing and
    the row must be masked out of every metric.
    """

    id: str
    rollout_id: str
    hard: float = 0.0
    soft: float = 0.0
    fail_reason: str = ""
    phase: str = ""
    agent_ok: bool = False
    n_turns: int = 0
    cases: tuple[CaseResult, ...] = ()
    metrics: Mapping[str, Any] = field(default_factory=dict)
    trace: Trace = field(default_factory=Trace)
    artifacts: tuple[File, ...] = ()
    usage: Usage = field(default_factory=Usage)
    timings_s: Mapping[str, float] = field(default_factory=dict)
    host: str = ""
    image_digest: str = ""
    infra_error: InfraFailure | None = None
    #: OCI runtime the rollout's container actually ran under (``runc``, ``runsc``); "" when
    #: no container was acquired.
    container_runtime: str = ""

    @property
    def ok(self) -> bool:
        return self.infra_error is None and self.hard >= 1.0 - 1e-9

    @classmethod
    def of_infra(cls, request: RolloutRequest, info: InfraFailure) -> RolloutResult:
        """The row of ``request`` when it ended on infrastructure (never scored)."""
        return cls(
            id=request.task.id,
            rollout_id=request.rollout_id,
            phase="infra",
            fail_reason=info.fail_reason,
            infra_error=info,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class HostDescription:
    """What a sandbox host reports about itself (the ``Describe`` RPC).

    ``agents`` are the ``env/agent`` pairs it can run; ``agent_runtimes`` says which OCI runtime
    each runs under; ``unavailable_agents`` says why the others cannot run here.
    """

    host: str
    version: str
    capacity: int
    free_slots: int
    running: int
    draining: bool
    agents: tuple[str, ...] = ()
    agent_runtimes: Mapping[str, str] = field(default_factory=dict)
    unavailable_agents: Mapping[str, str] = field(default_factory=dict)
    image_digests: Mapping[str, str] = field(default_factory=dict)
    pool_idle: Mapping[str, int] = field(default_factory=dict)
    container_runtime: str = ""
    providers: tuple[str, ...] = ()
    runner_sha256: str = ""
    available_runtimes: tuple[str, ...] = ()
    engine_version: str = ""
    service_build: str = ""
    image_labels: Mapping[str, str] = field(default_factory=dict)
    #: Live sessions (the general sandbox API) and the host-wide cap on them.
    sessions: int = 0
    max_sessions: int = 0
    #: Images of agents with their own image (tag → digest, "" when not built here).
    agent_image_digests: Mapping[str, str] = field(default_factory=dict)
    #: Skill packages it mounts: the most files (SKILL.md included) and bytes of one; 0 = a
    #: host that predates packages (it mounts SKILL.md alone).
    skill_package_max_files: int = 0
    skill_package_max_bytes: int = 0
    #: Languages of its SandboxFusion-compatible HTTP API (/run_code) and that API's port;
    #: ``()`` and 0: it serves none.
    languages: tuple[str, ...] = ()
    http_port: int = 0
    #: Container recycling: most executions per container (one tenant's, reset between them)
    #: and its oldest age; 0: never reused.
    reuse_max_executions: int = 0
    reuse_max_age_s: float = 0.0
