from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORK_OUTCOME_UNSPECIFIED: _ClassVar[WorkOutcome]
    WORK_OUTCOME_NOT_STARTED: _ClassVar[WorkOutcome]
    WORK_OUTCOME_LOST: _ClassVar[WorkOutcome]
    WORK_OUTCOME_FINAL: _ClassVar[WorkOutcome]
WORK_OUTCOME_UNSPECIFIED: WorkOutcome
WORK_OUTCOME_NOT_STARTED: WorkOutcome
WORK_OUTCOME_LOST: WorkOutcome
WORK_OUTCOME_FINAL: WorkOutcome

class File(_message.Message):
    __slots__ = ("name", "content", "sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    content: bytes
    sha256: str
    def __init__(self, name: _Optional[str] = ..., content: _Optional[bytes] = ..., sha256: _Optional[str] = ...) -> None: ...

class TestCase(_message.Message):
    __slots__ = ("name", "files")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    name: str
    files: _containers.RepeatedCompositeFieldContainer[File]
    def __init__(self, name: _Optional[str] = ..., files: _Optional[_Iterable[_Union[File, _Mapping]]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "instruction", "attributes_json", "cases")
    ID_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    CASES_FIELD_NUMBER: _ClassVar[int]
    id: str
    instruction: str
    attributes_json: str
    cases: _containers.RepeatedCompositeFieldContainer[TestCase]
    def __init__(self, id: _Optional[str] = ..., instruction: _Optional[str] = ..., attributes_json: _Optional[str] = ..., cases: _Optional[_Iterable[_Union[TestCase, _Mapping]]] = ...) -> None: ...

class Grading(_message.Message):
    __slots__ = ("attributes_json", "cases")
    ATTRIBUTES_JSON_FIELD_NUMBER: _ClassVar[int]
    CASES_FIELD_NUMBER: _ClassVar[int]
    attributes_json: str
    cases: _containers.RepeatedCompositeFieldContainer[TestCase]
    def __init__(self, attributes_json: _Optional[str] = ..., cases: _Optional[_Iterable[_Union[TestCase, _Mapping]]] = ...) -> None: ...

class Skill(_message.Message):
    __slots__ = ("name", "content", "sha256", "files", "tree_sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    TREE_SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    content: str
    sha256: str
    files: _containers.RepeatedCompositeFieldContainer[SkillFile]
    tree_sha256: str
    def __init__(self, name: _Optional[str] = ..., content: _Optional[str] = ..., sha256: _Optional[str] = ..., files: _Optional[_Iterable[_Union[SkillFile, _Mapping]]] = ..., tree_sha256: _Optional[str] = ...) -> None: ...

class SkillFile(_message.Message):
    __slots__ = ("path", "content", "sha256", "executable")
    PATH_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_FIELD_NUMBER: _ClassVar[int]
    path: str
    content: bytes
    sha256: str
    executable: bool
    def __init__(self, path: _Optional[str] = ..., content: _Optional[bytes] = ..., sha256: _Optional[str] = ..., executable: _Optional[bool] = ...) -> None: ...

class ModelSpec(_message.Message):
    __slots__ = ("provider", "model", "temperature", "max_output_tokens", "reasoning_effort", "extra_json", "no_prompt_caching")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REASONING_EFFORT_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    NO_PROMPT_CACHING_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    temperature: float
    max_output_tokens: int
    reasoning_effort: str
    extra_json: str
    no_prompt_caching: bool
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., temperature: _Optional[float] = ..., max_output_tokens: _Optional[int] = ..., reasoning_effort: _Optional[str] = ..., extra_json: _Optional[str] = ..., no_prompt_caching: _Optional[bool] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ("wall_time_s", "max_turns", "exec_timeout_s", "memory_bytes", "cpus", "output_bytes", "max_model_tokens")
    WALL_TIME_S_FIELD_NUMBER: _ClassVar[int]
    MAX_TURNS_FIELD_NUMBER: _ClassVar[int]
    EXEC_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_MODEL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    wall_time_s: float
    max_turns: int
    exec_timeout_s: float
    memory_bytes: int
    cpus: float
    output_bytes: int
    max_model_tokens: int
    def __init__(self, wall_time_s: _Optional[float] = ..., max_turns: _Optional[int] = ..., exec_timeout_s: _Optional[float] = ..., memory_bytes: _Optional[int] = ..., cpus: _Optional[float] = ..., output_bytes: _Optional[int] = ..., max_model_tokens: _Optional[int] = ...) -> None: ...

class RunRequest(_message.Message):
    __slots__ = ("rollout_id", "env", "agent", "task", "grading", "skill", "model", "limits", "use_eval_feedback", "diagnostic_instruction", "model_cache", "seed", "isolation")
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    GRADING_FIELD_NUMBER: _ClassVar[int]
    SKILL_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    USE_EVAL_FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTIC_INSTRUCTION_FIELD_NUMBER: _ClassVar[int]
    MODEL_CACHE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    env: str
    agent: str
    task: Task
    grading: Grading
    skill: Skill
    model: ModelSpec
    limits: Limits
    use_eval_feedback: bool
    diagnostic_instruction: str
    model_cache: str
    seed: int
    isolation: str
    def __init__(self, rollout_id: _Optional[str] = ..., env: _Optional[str] = ..., agent: _Optional[str] = ..., task: _Optional[_Union[Task, _Mapping]] = ..., grading: _Optional[_Union[Grading, _Mapping]] = ..., skill: _Optional[_Union[Skill, _Mapping]] = ..., model: _Optional[_Union[ModelSpec, _Mapping]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., use_eval_feedback: _Optional[bool] = ..., diagnostic_instruction: _Optional[str] = ..., model_cache: _Optional[str] = ..., seed: _Optional[int] = ..., isolation: _Optional[str] = ...) -> None: ...

class RunEvent(_message.Message):
    __slots__ = ("time_ns", "progress", "result")
    TIME_NS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    time_ns: int
    progress: Progress
    result: RunResult
    def __init__(self, time_ns: _Optional[int] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., result: _Optional[_Union[RunResult, _Mapping]] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("phase", "turn", "detail")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    phase: str
    turn: int
    detail: str
    def __init__(self, phase: _Optional[str] = ..., turn: _Optional[int] = ..., detail: _Optional[str] = ...) -> None: ...

class InfraError(_message.Message):
    __slots__ = ("kind", "message", "retryable", "outcome")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[InfraError.Kind]
        OOM_KILLED: _ClassVar[InfraError.Kind]
        TIMEOUT: _ClassVar[InfraError.Kind]
        CONTAINER_START_FAILED: _ClassVar[InfraError.Kind]
        SANDBOX_UNAVAILABLE: _ClassVar[InfraError.Kind]
        IMAGE_MISSING: _ClassVar[InfraError.Kind]
        GATEWAY_ERROR: _ClassVar[InfraError.Kind]
        MODEL_UNAVAILABLE: _ClassVar[InfraError.Kind]
        CANCELLED: _ClassVar[InfraError.Kind]
        INTERNAL: _ClassVar[InfraError.Kind]
        REPLAY_MISS: _ClassVar[InfraError.Kind]
        MODEL_AUTH: _ClassVar[InfraError.Kind]
        MODEL_RATE_LIMITED: _ClassVar[InfraError.Kind]
        MODEL_BAD_REQUEST: _ClassVar[InfraError.Kind]
    KIND_UNSPECIFIED: InfraError.Kind
    OOM_KILLED: InfraError.Kind
    TIMEOUT: InfraError.Kind
    CONTAINER_START_FAILED: InfraError.Kind
    SANDBOX_UNAVAILABLE: InfraError.Kind
    IMAGE_MISSING: InfraError.Kind
    GATEWAY_ERROR: InfraError.Kind
    MODEL_UNAVAILABLE: InfraError.Kind
    CANCELLED: InfraError.Kind
    INTERNAL: InfraError.Kind
    REPLAY_MISS: InfraError.Kind
    MODEL_AUTH: InfraError.Kind
    MODEL_RATE_LIMITED: InfraError.Kind
    MODEL_BAD_REQUEST: InfraError.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    kind: InfraError.Kind
    message: str
    retryable: bool
    outcome: WorkOutcome
    def __init__(self, kind: _Optional[_Union[InfraError.Kind, str]] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ..., outcome: _Optional[_Union[WorkOutcome, str]] = ...) -> None: ...

class CaseResult(_message.Message):
    __slots__ = ("name", "ok", "stage", "reason", "report")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    ok: bool
    stage: str
    reason: str
    report: str
    def __init__(self, name: _Optional[str] = ..., ok: _Optional[bool] = ..., stage: _Optional[str] = ..., reason: _Optional[str] = ..., report: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "name", "tool_call_id", "tool_calls_json")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_JSON_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    name: str
    tool_call_id: str
    tool_calls_json: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., tool_calls_json: _Optional[str] = ...) -> None: ...

class ExecRecord(_message.Message):
    __slots__ = ("turn", "case", "code", "exit_code", "stdout_tail", "stderr_tail", "duration_s", "timed_out", "oom_killed")
    TURN_FIELD_NUMBER: _ClassVar[int]
    CASE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    turn: int
    case: str
    code: str
    exit_code: int
    stdout_tail: str
    stderr_tail: str
    duration_s: float
    timed_out: bool
    oom_killed: bool
    def __init__(self, turn: _Optional[int] = ..., case: _Optional[str] = ..., code: _Optional[str] = ..., exit_code: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., duration_s: _Optional[float] = ..., timed_out: _Optional[bool] = ..., oom_killed: _Optional[bool] = ...) -> None: ...

class Trace(_message.Message):
    __slots__ = ("messages", "executions", "system_prompt", "user_prompt", "code", "notes", "elided_skill_sha256")
    class NotesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    USER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    ELIDED_SKILL_SHA256_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    executions: _containers.RepeatedCompositeFieldContainer[ExecRecord]
    system_prompt: str
    user_prompt: str
    code: str
    notes: _containers.ScalarMap[str, str]
    elided_skill_sha256: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., executions: _Optional[_Iterable[_Union[ExecRecord, _Mapping]]] = ..., system_prompt: _Optional[str] = ..., user_prompt: _Optional[str] = ..., code: _Optional[str] = ..., notes: _Optional[_Mapping[str, str]] = ..., elided_skill_sha256: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("calls", "prompt_tokens", "completion_tokens", "cached_input_tokens", "cache_write_input_tokens")
    CALLS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    def __init__(self, calls: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., cache_write_input_tokens: _Optional[int] = ...) -> None: ...

class RunResult(_message.Message):
    __slots__ = ("id", "rollout_id", "hard", "soft", "fail_reason", "phase", "agent_ok", "n_turns", "cases", "metrics_json", "trace", "artifacts", "usage", "timings_s", "host", "image_digest", "infra_error", "container_runtime")
    class TimingsSEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    HARD_FIELD_NUMBER: _ClassVar[int]
    SOFT_FIELD_NUMBER: _ClassVar[int]
    FAIL_REASON_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    AGENT_OK_FIELD_NUMBER: _ClassVar[int]
    N_TURNS_FIELD_NUMBER: _ClassVar[int]
    CASES_FIELD_NUMBER: _ClassVar[int]
    METRICS_JSON_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_S_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    IMAGE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    INFRA_ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_RUNTIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    rollout_id: str
    hard: float
    soft: float
    fail_reason: str
    phase: str
    agent_ok: bool
    n_turns: int
    cases: _containers.RepeatedCompositeFieldContainer[CaseResult]
    metrics_json: str
    trace: Trace
    artifacts: _containers.RepeatedCompositeFieldContainer[File]
    usage: Usage
    timings_s: _containers.ScalarMap[str, float]
    host: str
    image_digest: str
    infra_error: InfraError
    container_runtime: str
    def __init__(self, id: _Optional[str] = ..., rollout_id: _Optional[str] = ..., hard: _Optional[float] = ..., soft: _Optional[float] = ..., fail_reason: _Optional[str] = ..., phase: _Optional[str] = ..., agent_ok: _Optional[bool] = ..., n_turns: _Optional[int] = ..., cases: _Optional[_Iterable[_Union[CaseResult, _Mapping]]] = ..., metrics_json: _Optional[str] = ..., trace: _Optional[_Union[Trace, _Mapping]] = ..., artifacts: _Optional[_Iterable[_Union[File, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., timings_s: _Optional[_Mapping[str, float]] = ..., host: _Optional[str] = ..., image_digest: _Optional[str] = ..., infra_error: _Optional[_Union[InfraError, _Mapping]] = ..., container_runtime: _Optional[str] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("host", "version", "capacity", "free_slots", "running", "draining", "agents", "image_digests", "pool_idle", "container_runtime", "providers", "runner_sha256", "agent_runtimes", "unavailable_agents", "available_runtimes", "engine_version", "service_build", "image_labels", "sessions", "max_sessions", "agent_image_digests", "skill_package_max_files", "skill_package_max_bytes", "languages", "http_port", "reuse_max_executions", "reuse_max_age_s")
    class ImageDigestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class PoolIdleEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class AgentRuntimesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class UnavailableAgentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ImageLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AgentImageDigestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HOST_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    IMAGE_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    POOL_IDLE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_RUNTIME_FIELD_NUMBER: _ClassVar[int]
    PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    RUNNER_SHA256_FIELD_NUMBER: _ClassVar[int]
    AGENT_RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_AGENTS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_RUNTIMES_FIELD_NUMBER: _ClassVar[int]
    ENGINE_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVICE_BUILD_FIELD_NUMBER: _ClassVar[int]
    IMAGE_LABELS_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    AGENT_IMAGE_DIGESTS_FIELD_NUMBER: _ClassVar[int]
    SKILL_PACKAGE_MAX_FILES_FIELD_NUMBER: _ClassVar[int]
    SKILL_PACKAGE_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    LANGUAGES_FIELD_NUMBER: _ClassVar[int]
    HTTP_PORT_FIELD_NUMBER: _ClassVar[int]
    REUSE_MAX_EXECUTIONS_FIELD_NUMBER: _ClassVar[int]
    REUSE_MAX_AGE_S_FIELD_NUMBER: _ClassVar[int]
    host: str
    version: str
    capacity: int
    free_slots: int
    running: int
    draining: bool
    agents: _containers.RepeatedScalarFieldContainer[str]
    image_digests: _containers.ScalarMap[str, str]
    pool_idle: _containers.ScalarMap[str, int]
    container_runtime: str
    providers: _containers.RepeatedScalarFieldContainer[str]
    runner_sha256: str
    agent_runtimes: _containers.ScalarMap[str, str]
    unavailable_agents: _containers.ScalarMap[str, str]
    available_runtimes: _containers.RepeatedScalarFieldContainer[str]
    engine_version: str
    service_build: str
    image_labels: _containers.ScalarMap[str, str]
    sessions: int
    max_sessions: int
    agent_image_digests: _containers.ScalarMap[str, str]
    skill_package_max_files: int
    skill_package_max_bytes: int
    languages: _containers.RepeatedScalarFieldContainer[str]
    http_port: int
    reuse_max_executions: int
    reuse_max_age_s: float
    def __init__(self, host: _Optional[str] = ..., version: _Optional[str] = ..., capacity: _Optional[int] = ..., free_slots: _Optional[int] = ..., running: _Optional[int] = ..., draining: _Optional[bool] = ..., agents: _Optional[_Iterable[str]] = ..., image_digests: _Optional[_Mapping[str, str]] = ..., pool_idle: _Optional[_Mapping[str, int]] = ..., container_runtime: _Optional[str] = ..., providers: _Optional[_Iterable[str]] = ..., runner_sha256: _Optional[str] = ..., agent_runtimes: _Optional[_Mapping[str, str]] = ..., unavailable_agents: _Optional[_Mapping[str, str]] = ..., available_runtimes: _Optional[_Iterable[str]] = ..., engine_version: _Optional[str] = ..., service_build: _Optional[str] = ..., image_labels: _Optional[_Mapping[str, str]] = ..., sessions: _Optional[int] = ..., max_sessions: _Optional[int] = ..., agent_image_digests: _Optional[_Mapping[str, str]] = ..., skill_package_max_files: _Optional[int] = ..., skill_package_max_bytes: _Optional[int] = ..., languages: _Optional[_Iterable[str]] = ..., http_port: _Optional[int] = ..., reuse_max_executions: _Optional[int] = ..., reuse_max_age_s: _Optional[float] = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ("reason", "retryable", "host", "retry_after_s", "missing_sha256", "outcome", "skill_problems")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[ErrorDetail.Reason]
        INVALID_REQUEST: _ClassVar[ErrorDetail.Reason]
        UNAUTHENTICATED: _ClassVar[ErrorDetail.Reason]
        HOST_FULL: _ClassVar[ErrorDetail.Reason]
        DRAINING: _ClassVar[ErrorDetail.Reason]
        UNAVAILABLE: _ClassVar[ErrorDetail.Reason]
        IMAGE_MISSING: _ClassVar[ErrorDetail.Reason]
        NOT_FOUND: _ClassVar[ErrorDetail.Reason]
        CANCELLED: _ClassVar[ErrorDetail.Reason]
        DEADLINE_EXCEEDED: _ClassVar[ErrorDetail.Reason]
        INTERNAL: _ClassVar[ErrorDetail.Reason]
        SESSION_NOT_FOUND: _ClassVar[ErrorDetail.Reason]
        SESSION_LIMIT: _ClassVar[ErrorDetail.Reason]
        FILE_NOT_FOUND: _ClassVar[ErrorDetail.Reason]
        PERMISSION_DENIED: _ClassVar[ErrorDetail.Reason]
        IS_A_DIRECTORY: _ClassVar[ErrorDetail.Reason]
        FILE_TOO_LARGE: _ClassVar[ErrorDetail.Reason]
        USER_UNSUPPORTED: _ClassVar[ErrorDetail.Reason]
        BLOBS_MISSING: _ClassVar[ErrorDetail.Reason]
        SKILL_PACKAGE_INVALID: _ClassVar[ErrorDetail.Reason]
        ISOLATION_UNAVAILABLE: _ClassVar[ErrorDetail.Reason]
    REASON_UNSPECIFIED: ErrorDetail.Reason
    INVALID_REQUEST: ErrorDetail.Reason
    UNAUTHENTICATED: ErrorDetail.Reason
    HOST_FULL: ErrorDetail.Reason
    DRAINING: ErrorDetail.Reason
    UNAVAILABLE: ErrorDetail.Reason
    IMAGE_MISSING: ErrorDetail.Reason
    NOT_FOUND: ErrorDetail.Reason
    CANCELLED: ErrorDetail.Reason
    DEADLINE_EXCEEDED: ErrorDetail.Reason
    INTERNAL: ErrorDetail.Reason
    SESSION_NOT_FOUND: ErrorDetail.Reason
    SESSION_LIMIT: ErrorDetail.Reason
    FILE_NOT_FOUND: ErrorDetail.Reason
    PERMISSION_DENIED: ErrorDetail.Reason
    IS_A_DIRECTORY: ErrorDetail.Reason
    FILE_TOO_LARGE: ErrorDetail.Reason
    USER_UNSUPPORTED: ErrorDetail.Reason
    BLOBS_MISSING: ErrorDetail.Reason
    SKILL_PACKAGE_INVALID: ErrorDetail.Reason
    ISOLATION_UNAVAILABLE: ErrorDetail.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_S_FIELD_NUMBER: _ClassVar[int]
    MISSING_SHA256_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SKILL_PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    reason: ErrorDetail.Reason
    retryable: bool
    host: str
    retry_after_s: float
    missing_sha256: _containers.RepeatedScalarFieldContainer[str]
    outcome: WorkOutcome
    skill_problems: _containers.RepeatedCompositeFieldContainer[SkillProblem]
    def __init__(self, reason: _Optional[_Union[ErrorDetail.Reason, str]] = ..., retryable: _Optional[bool] = ..., host: _Optional[str] = ..., retry_after_s: _Optional[float] = ..., missing_sha256: _Optional[_Iterable[str]] = ..., outcome: _Optional[_Union[WorkOutcome, str]] = ..., skill_problems: _Optional[_Iterable[_Union[SkillProblem, _Mapping]]] = ...) -> None: ...

class SkillProblem(_message.Message):
    __slots__ = ("path", "rule", "message")
    PATH_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    path: str
    rule: str
    message: str
    def __init__(self, path: _Optional[str] = ..., rule: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class CancelRequest(_message.Message):
    __slots__ = ("rollout_id",)
    ROLLOUT_ID_FIELD_NUMBER: _ClassVar[int]
    rollout_id: str
    def __init__(self, rollout_id: _Optional[str] = ...) -> None: ...

class CancelResponse(_message.Message):
    __slots__ = ("cancelled",)
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    def __init__(self, cancelled: _Optional[bool] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("image", "limits", "idle_ttl_s", "max_lifetime_s", "labels", "network", "skill", "files", "isolation")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TTL_S_FIELD_NUMBER: _ClassVar[int]
    MAX_LIFETIME_S_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    SKILL_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_FIELD_NUMBER: _ClassVar[int]
    image: str
    limits: Limits
    idle_ttl_s: float
    max_lifetime_s: float
    labels: _containers.ScalarMap[str, str]
    network: str
    skill: Skill
    files: _containers.RepeatedCompositeFieldContainer[File]
    isolation: str
    def __init__(self, image: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., idle_ttl_s: _Optional[float] = ..., max_lifetime_s: _Optional[float] = ..., labels: _Optional[_Mapping[str, str]] = ..., network: _Optional[str] = ..., skill: _Optional[_Union[Skill, _Mapping]] = ..., files: _Optional[_Iterable[_Union[File, _Mapping]]] = ..., isolation: _Optional[str] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ("session_id", "host", "image", "image_digest", "network", "labels", "created_ns", "idle_expires_ns", "max_expires_ns", "idle_ttl_s", "user", "workdir", "container_runtime", "limits")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    NETWORK_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CREATED_NS_FIELD_NUMBER: _ClassVar[int]
    IDLE_EXPIRES_NS_FIELD_NUMBER: _ClassVar[int]
    MAX_EXPIRES_NS_FIELD_NUMBER: _ClassVar[int]
    IDLE_TTL_S_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    WORKDIR_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_RUNTIME_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    host: str
    image: str
    image_digest: str
    network: str
    labels: _containers.ScalarMap[str, str]
    created_ns: int
    idle_expires_ns: int
    max_expires_ns: int
    idle_ttl_s: float
    user: str
    workdir: str
    container_runtime: str
    limits: Limits
    def __init__(self, session_id: _Optional[str] = ..., host: _Optional[str] = ..., image: _Optional[str] = ..., image_digest: _Optional[str] = ..., network: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., created_ns: _Optional[int] = ..., idle_expires_ns: _Optional[int] = ..., max_expires_ns: _Optional[int] = ..., idle_ttl_s: _Optional[float] = ..., user: _Optional[str] = ..., workdir: _Optional[str] = ..., container_runtime: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ...) -> None: ...

class ExecStart(_message.Message):
    __slots__ = ("session_id", "argv", "cwd", "env", "timeout_s", "output_limit_bytes", "user")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ARGV_FIELD_NUMBER: _ClassVar[int]
    CWD_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_BYTES_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    argv: _containers.RepeatedScalarFieldContainer[str]
    cwd: str
    env: _containers.ScalarMap[str, str]
    timeout_s: float
    output_limit_bytes: int
    user: str
    def __init__(self, session_id: _Optional[str] = ..., argv: _Optional[_Iterable[str]] = ..., cwd: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., timeout_s: _Optional[float] = ..., output_limit_bytes: _Optional[int] = ..., user: _Optional[str] = ...) -> None: ...

class ExecInput(_message.Message):
    __slots__ = ("start", "stdin")
    START_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    start: ExecStart
    stdin: bytes
    def __init__(self, start: _Optional[_Union[ExecStart, _Mapping]] = ..., stdin: _Optional[bytes] = ...) -> None: ...

class ExecExit(_message.Message):
    __slots__ = ("exit_code", "signal", "timed_out", "oom_killed", "output_limit_exceeded", "duration_s", "stdout_bytes", "stderr_bytes", "spawn_error", "message")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    OOM_KILLED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_LIMIT_EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    DURATION_S_FIELD_NUMBER: _ClassVar[int]
    STDOUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    STDERR_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPAWN_ERROR_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    signal: int
    timed_out: bool
    oom_killed: bool
    output_limit_exceeded: bool
    duration_s: float
    stdout_bytes: int
    stderr_bytes: int
    spawn_error: str
    message: str
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., timed_out: _Optional[bool] = ..., oom_killed: _Optional[bool] = ..., output_limit_exceeded: _Optional[bool] = ..., duration_s: _Optional[float] = ..., stdout_bytes: _Optional[int] = ..., stderr_bytes: _Optional[int] = ..., spawn_error: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ExecOutput(_message.Message):
    __slots__ = ("stdout", "stderr", "exit")
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    EXIT_FIELD_NUMBER: _ClassVar[int]
    stdout: bytes
    stderr: bytes
    exit: ExecExit
    def __init__(self, stdout: _Optional[bytes] = ..., stderr: _Optional[bytes] = ..., exit: _Optional[_Union[ExecExit, _Mapping]] = ...) -> None: ...

class WriteFileStart(_message.Message):
    __slots__ = ("session_id", "path", "size")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    path: str
    size: int
    def __init__(self, session_id: _Optional[str] = ..., path: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class WriteFileInput(_message.Message):
    __slots__ = ("start", "data")
    START_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    start: WriteFileStart
    data: bytes
    def __init__(self, start: _Optional[_Union[WriteFileStart, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class WriteFileResponse(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: _Optional[int] = ...) -> None: ...

class ReadFileRequest(_message.Message):
    __slots__ = ("session_id", "path", "max_bytes")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    path: str
    max_bytes: int
    def __init__(self, session_id: _Optional[str] = ..., path: _Optional[str] = ..., max_bytes: _Optional[int] = ...) -> None: ...

class FileChunk(_message.Message):
    __slots__ = ("data", "size")
    DATA_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    size: int
    def __init__(self, data: _Optional[bytes] = ..., size: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ...) -> None: ...

class DestroySessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class DestroySessionResponse(_message.Message):
    __slots__ = ("destroyed",)
    DESTROYED_FIELD_NUMBER: _ClassVar[int]
    destroyed: bool
    def __init__(self, destroyed: _Optional[bool] = ...) -> None: ...

class ExtendSessionRequest(_message.Message):
    __slots__ = ("session_id", "idle_ttl_s")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    IDLE_TTL_S_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    idle_ttl_s: float
    def __init__(self, session_id: _Optional[str] = ..., idle_ttl_s: _Optional[float] = ...) -> None: ...
