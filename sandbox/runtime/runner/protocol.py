"""The runner protocol: everything the sandbox service and the in-container runner say to each
other, defined once and imported by both sides.

The service imports it as ``sandbox.runtime.runner.protocol``; inside every container the runner
package is mounted read-only and imported as ``_skillopt_runner`` (see ``runner.py``), so this
module is stdlib only and runs on the image's Python (3.9 or later), not the service's.

Conversation over one unix-socket connection, opened by the runner:

1. the runner sends :class:`Hello`;
2. the service sends one request at a time (:class:`WriteRequest`, :class:`ReadRequest`,
   :class:`ListRequest`, :class:`ExecRequest`, :class:`ResetRequest`, :data:`Op.OOM`,
   :data:`Op.PING`), each with an
   ``id`` that its reply echoes; a reply is ``{"ok": true, ...}`` (the request's reply type)
   or ``{"ok": false, "error": <ErrorCode>, "message": ...}`` (:class:`RunnerError`);
3. a streaming execution sends ``{"type": "out", "fd": 1|2}`` messages (:func:`output_header`)
   before its reply, and a ``{"op": "cancel"}`` from the service while it runs kills it (a
   cancel that arrives when nothing runs is ignored).

Wire format, both directions: a 4-byte big-endian length, a UTF-8 JSON header of that length,
then ``header["size"]`` raw bytes when the header has a ``size`` (file contents, stdin, output).

Trust: the runner shares its uid with the code it runs, so the service bounds every reply before
reading it and believes the runner's word only where it cannot change an outcome (timeouts:
:func:`timeout_confirmed`; OOM kills come from the host's cgroup reading when it has one).
"""

from __future__ import annotations

import enum
import json
import socket
import struct
from dataclasses import MISSING, Field, dataclass, field, fields

TYPE_CHECKING = False  # typing is not imported at run time: it would slow the runner's start
if TYPE_CHECKING:
    from typing import ClassVar, Self

PROTOCOL_VERSION = 1
#: The container's writable workspace: relative paths are below it; commands start in it.
WORKSPACE = "/workspace"

_LENGTH = struct.Struct(">I")
#: Largest JSON header either side accepts.
MAX_HEADER_BYTES = 16 * 1024 * 1024
#: Largest payload of one output message (the runner reads its pipes this much at a time).
OUTPUT_CHUNK_BYTES = 64 * 1024

#: How long the runner's sweep after an execution may take. Every process left (a fork bomb's
#: 255 sleepers) must exit, and an exit tears down a copy of a parent that holds pandas: on a
#: loaded 2-core host that took ~0.1 s each (the hostile suite's fork_bomb), so 5 s left
#: survivors and turned the program's own failure into an unscored infrastructure error.
SWEEP_DEADLINE_S = 30.0
#: Extra time the service waits for an execution's reply beyond its timeout before it declares
#: the sandbox hung and kills it: the runner's sweep (:data:`SWEEP_DEADLINE_S`) plus a margin.
BACKSTOP_SLACK_S = SWEEP_DEADLINE_S + 15.0


def timeout_confirmed(claimed: bool, elapsed_s: float, timeout_s: float) -> bool:
    """Whether an execution timed out: the runner says so *and* the service's own clock agrees
    (``elapsed_s``, measured around the call, reached the timeout; 2% for clock granularity).
    The runner's word alone never makes an outcome a timeout."""
    return bool(claimed) and elapsed_s >= timeout_s * 0.98


class Op:
    """Request operations (``header["op"]``)."""

    WRITE = "write"
    READ = "read"
    LIST = "list"
    EXEC = "exec"
    CANCEL = "cancel"
    OOM = "oom"
    PING = "ping"
    RESET = "reset"


class Sweep(str, enum.Enum):  # noqa: UP042 - enum.StrEnum is 3.11+; the runner runs on 3.9
    """What goes when an execution ends (:attr:`ExecRequest.sweep` carries its ``value``).

    Defined here, where the runner reads it, and re-exported by the runtime contract
    (``sandbox.runtime.base``). It imports nothing new into the runner (``socket`` and
    ``signal`` import ``enum`` already); making the class costs ~0.15 ms, once per container.
    """

    #: Every process but the runner (rollouts: nothing outlives an execution).
    ALWAYS = "always"
    #: Background processes outlive the command, unless it was killed (timeout, cancel, output
    #: cap): then every process of the sandbox goes (sessions).
    ON_KILL = "on_kill"


class ErrorCode:
    """``header["error"]`` of a refused request."""

    BAD_OP = "bad_op"
    #: A path the request may not use: outside the workspace (confined), through a link
    #: (confined), too long, or a link loop.
    BAD_PATH = "bad_path"
    NOT_FOUND = "not_found"
    #: Confined reads: a link, a directory or a special file (never followed or read).
    NOT_REGULAR = "not_regular"
    PERMISSION = "permission"
    IS_DIR = "is_dir"
    TOO_LARGE = "too_large"
    NO_SPACE = "no_space"
    OS_ERROR = "os_error"
    INTERNAL = "internal"


class SpawnCode:
    """Why a program did not start (:attr:`ExecReply.spawn_error`)."""

    NOT_FOUND = "not_found"
    PERMISSION = "permission"
    CWD = "cwd"


class RunnerError(Exception):
    """A refused request: raised by the runner's handlers, sent as ``{"ok": false}``, and
    raised again on the service's side by :func:`decode_reply`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def encode(self) -> dict:
        return {"ok": False, "error": self.code, "message": self.message}


class ProtocolError(ValueError):
    """A message that breaks the protocol (oversize, garbled, fields of the wrong type): the
    connection is out of sync and must not be used again."""


# -- framing ------------------------------------------------------------------------------------


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("control connection closed")
        buf += chunk
    return bytes(buf)


def recv_message(sock: socket.socket, max_size: int | None = None) -> tuple[dict, bytes]:
    """One message (header, payload). A payload larger than ``max_size`` is refused before it
    is read: the service bounds what a container may make it hold.

    Raises:
        EOFError: the peer closed the connection.
        ProtocolError: an oversize header or payload, or a header that is not a JSON object.
    """
    (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    if length > MAX_HEADER_BYTES:
        raise ProtocolError(f"header too large: {length}")
    try:
        header = json.loads(_recv_exact(sock, length).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(f"garbled header: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("header is not an object")
    size = header.get("size") or 0
    if not isinstance(size, int) or size < 0:
        raise ProtocolError(f"bad payload size {size!r}")
    if max_size is not None and size > max_size:
        raise ProtocolError(f"payload of {size} bytes exceeds {max_size}")
    payload = _recv_exact(sock, size) if size else b""
    return header, payload


def send_message(sock: socket.socket, header: dict, payload: bytes = b"") -> None:
    """Send one message (``size`` is added for a payload)."""
    if payload:
        header = {**header, "size": len(payload)}
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    sock.sendall(_LENGTH.pack(len(raw)) + raw + payload)


def output_header(fd: int) -> dict:
    """The header of a streaming execution's output message (payload: at most
    :data:`OUTPUT_CHUNK_BYTES` of what the program wrote to ``fd``)."""
    return {"type": "out", "fd": 2 if fd == 2 else 1}


def is_output(header: dict) -> bool:
    return header.get("type") == "out"


# -- typed messages -----------------------------------------------------------------------------

# Field types as written in the annotations below (strings under ``from __future__ import
# annotations``) -> the Python types a received value may have. The service receives from an
# untrusted runner: a value of the wrong type is a ProtocolError, never passed on.
# JSON decodes to exactly these types (never a subclass: a bool is not an int here).
_TYPES: dict[str, frozenset[type]] = {
    "str": frozenset({str}),
    "int": frozenset({int}),
    "bool": frozenset({bool}),
    "float": frozenset({int, float}),
    "list": frozenset({list}),
    "dict": frozenset({dict}),
}


#: A field without a default: always sent.
_REQUIRED = object()


class _Field:
    """How one field is sent and checked (worked out once per message type)."""

    __slots__ = ("default", "kind", "name", "to_float", "types")

    def __init__(self, name: str, kind: str, default: object) -> None:
        self.name, self.kind, self.default = name, kind, default
        optional = kind.endswith(" | None")
        base = kind[: -len(" | None")] if optional else kind
        self.types = _TYPES[base.split("[")[0]] | ({type(None)} if optional else set())
        self.to_float = base == "float"


def _default(f: Field) -> object:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return _REQUIRED


class Message:
    """Encode to / decode from a JSON header: the dataclass's fields by name, plus ``op`` for
    a request. A missing field takes its default; a field of the wrong type is refused.

    The messages are dataclasses whose equality and repr come from here (by their encoding),
    and they are not frozen, though nothing changes one once made: the runner defines every
    message at its start, where each method a dataclass generates costs ~0.1 ms of CPU, and a
    frozen one's constructor costs twice a plain one's on the path of every execution."""

    op: ClassVar[str] = ""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and type(self) is type(other) and self.encode() == other.encode()

    __hash__ = None  # type: ignore[assignment]  # equal by value, and mutable

    def __repr__(self) -> str:
        fields_ = ", ".join(f"{k}={v!r}" for k, v in self.encode().items() if k != "op")
        return f"{type(self).__name__}({fields_})"

    @classmethod
    def _fields(cls) -> tuple[_Field, ...]:
        known = cls.__dict__.get("_field_specs")
        if known is None:
            known = tuple(
                _Field(f.name, str(f.type), _default(f))
                for f in fields(cls)  # type: ignore[arg-type]  # every message class is a dataclass
            )
            cls._field_specs = known  # type: ignore[attr-defined]  # a cache on the class itself
        return known

    def values(self) -> dict:
        """The fields by name, those at their default left out (``cls(**values)`` makes the
        same message again): the headers stay short to encode and to parse."""
        out = {}
        for f in self._fields():
            value = getattr(self, f.name)
            if f.default is _REQUIRED or value != f.default:
                out[f.name] = value
        return out

    def encode(self) -> dict:
        out = self.values()
        if self.op:
            out["op"] = self.op
        return out

    @classmethod
    def decode(cls, header: dict) -> Self:
        values = {}
        for f in cls._fields():  # inline, not a call per field: a reply is decoded per execution
            if f.name in header:
                value = header[f.name]
                if type(value) not in f.types:
                    raise ProtocolError(f"field {f.name!r}: expected {f.kind}, got {type(value).__name__}")
                values[f.name] = float(value) if f.to_float and value is not None else value
        try:
            return cls(**values)
        except TypeError as exc:  # a required field is missing
            raise ProtocolError(f"{cls.__name__}: {exc}") from None


@dataclass(repr=False, eq=False)
class Hello(Message):
    """The runner's first message, once connected and its imports are done. ``type`` and
    ``protocol`` have no default, so they are always sent: the service refuses a runner that
    speaks another version."""

    type: str  # "hello"
    protocol: int  # the runner's PROTOCOL_VERSION
    pid: int
    uid: int
    python: str = ""
    preimported: list[str] = field(default_factory=list)
    preimport_s: float = 0.0
    non_dumpable: bool = False


@dataclass(repr=False, eq=False)
class WriteRequest(Message):
    """Create or replace a regular file (payload: its content; parents are created).

    ``confined`` (rollouts): ``path`` is relative to the workspace, links are never followed and
    a refusal is :data:`ErrorCode.BAD_PATH`. Otherwise (sessions): any path the container's user
    may write, absolute or relative to the workspace, links followed as any program would, and
    a refusal carries the errno's own kind (:data:`ErrorCode.PERMISSION`, ``IS_DIR`` ...)."""

    op = Op.WRITE
    path: str
    confined: bool = True
    mode: int = 0o644


@dataclass(repr=False, eq=False)
class WriteReply(Message):
    written: int = 0


@dataclass(repr=False, eq=False)
class ReadRequest(Message):
    """The content of a regular file (in the reply's payload), at most ``max_bytes``
    (:data:`ErrorCode.TOO_LARGE` beyond). ``confined`` as for :class:`WriteRequest`; a confined
    read refuses links, directories and special files with :data:`ErrorCode.NOT_REGULAR`."""

    op = Op.READ
    path: str
    max_bytes: int = 64 << 20
    confined: bool = True


@dataclass(repr=False, eq=False)
class ReadReply(Message):
    pass


@dataclass(repr=False, eq=False)
class ListRequest(Message):
    """Regular files under the workspace, recursively, never following links."""

    op = Op.LIST
    max_files: int = 1000


@dataclass(repr=False, eq=False)
class ListReply(Message):
    #: ``{"path": <relative>, "size": <bytes>}`` per file.
    files: list[dict] = field(default_factory=list)
    truncated: bool = False


@dataclass(repr=False, eq=False)
class OomRequest(Message):
    """The container's own OOM-kill counter (for hosts that cannot read its cgroup)."""

    op = Op.OOM


@dataclass(repr=False, eq=False)
class OomReply(Message):
    oom_kill: int | None = None


@dataclass(repr=False, eq=False)
class ExecRequest(Message):
    """Run ``argv`` (on the container's PATH) or the Python file ``python`` with ``args``, in a
    child forked from the runner, with ``stdin_size`` bytes of payload as its stdin.

    ``stream``: output goes to the service as it comes (output messages, at most
    ``output_limit_bytes`` in all, beyond which the program is killed) and the service may
    cancel; otherwise the reply carries the last ``output_limit_bytes`` of each stream."""

    op = Op.EXEC
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = WORKSPACE
    argv: list[str] = field(default_factory=list)
    python: str = ""
    args: list[str] = field(default_factory=list)
    stdin_size: int = 0
    output_limit_bytes: int = 65536
    stream: bool = False
    #: A :class:`Sweep`'s value.
    sweep: str = Sweep.ALWAYS.value


@dataclass(repr=False, eq=False)
class ExecReply(Message):
    """How an execution ended, in the runner's words (the service decides what to believe:
    :func:`timeout_confirmed`)."""

    exit_code: int | None = None
    signal: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    output_limit_exceeded: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    duration_s: float = 0.0
    started_at_ns: int = 0
    #: Processes the sweep could not kill: the sandbox cannot be trusted any more.
    leftover_processes: int = 0
    #: ``{"code": <SpawnCode>, "message": ...}`` when the program did not start.
    spawn_error: dict | None = None
    #: The kept output (empty for a streaming execution: it was sent as it came).
    stdout_tail: str = ""
    stderr_tail: str = ""


@dataclass(repr=False, eq=False)
class PingRequest(Message):
    op = Op.PING


@dataclass(repr=False, eq=False)
class PingReply(Message):
    pid: int = 0


@dataclass(repr=False, eq=False)
class ResetRequest(Message):
    """Bring the container back to how it was before any program ran, and check it: every
    process but the runner killed, every place the sandbox's user may write emptied, System V
    IPC removed, the runner's own state restored (``reset.py``). Sent between two executions
    of one tenant, never while one runs."""

    op = Op.RESET


@dataclass(repr=False, eq=False)
class ResetReply(Message):
    """What a reset did, and what it could not restore or confirm (``problems``: empty only
    when every item held; one problem and the container must not be reused)."""

    problems: list[str] = field(default_factory=list)
    files_removed: int = 0
    ipc_removed: int = 0
    #: Items of the runner's own state a program had changed and the reset put back.
    restored: list[str] = field(default_factory=list)
    duration_s: float = 0.0


#: The request type of each operation (the runner's decoding).
REQUESTS: dict[str, type[Message]] = {
    cls.op: cls
    for cls in (WriteRequest, ReadRequest, ListRequest, OomRequest, ExecRequest, PingRequest, ResetRequest)
}
#: A cancel of the streaming execution in flight (no reply).
CANCEL = {"op": Op.CANCEL}


def encode_request(request: Message, request_id: int) -> dict:
    return {**request.encode(), "id": request_id}


def decode_request(header: dict) -> Message:
    """The typed request of a received header.

    Raises:
        RunnerError: an unknown operation or malformed fields.
    """
    cls = REQUESTS.get(str(header.get("op")))
    if cls is None:
        raise RunnerError(ErrorCode.BAD_OP, f"unknown op {header.get('op')!r}")
    try:
        return cls.decode(header)
    except ProtocolError as exc:
        raise RunnerError(ErrorCode.BAD_OP, str(exc)) from None


def encode_reply(reply: Message, request_id: object) -> dict:
    return {**reply.encode(), "ok": True, "id": request_id}


def check_reply(header: dict) -> None:
    """Raise the refusal a reply carries (then decode it with its type's ``decode``).

    Raises:
        RunnerError: the runner refused the request (its code and message, bounded).
    """
    if header.get("ok") is not True:
        code, message = header.get("error"), header.get("message")
        raise RunnerError(str(code)[:64], str(message if message is not None else code)[:2000])
