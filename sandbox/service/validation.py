"""Request validation at the door: every name, size and limit is checked before any resource
is used, and every refusal is an :class:`InvalidRequest` whose message quotes at most a short
prefix of what was sent (a message must never grow with its input: a 10 MB echo would exceed
gRPC's metadata limit and turn a clear INVALID_ARGUMENT into RESOURCE_EXHAUSTED).

Limits (``skillopt.types.Limits``): unset means the host's default; a finite value above the
host's maximum is clamped to it (the proto says so); a value that is not a number, not finite,
negative or below a floor is refused. The CPU maximum is also bounded by the cores this host
has, so a rollout never fails at container start for asking more than exists.
"""

from __future__ import annotations

import enum
import hashlib
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import fields, is_dataclass, replace
from typing import Any

from sandbox.service.config import ServiceConfig
from skillopt.envs.base import Environment
from skillopt.errors import InvalidRequest, SkillPackageRefused
from skillopt.files import check_relative_name, shorten
from skillopt.models.profiles import ProviderProfile
from skillopt.skill.package import (
    DEFAULT_SKILL_NAME,
    PackageLimits,
    package_problems,
)
from skillopt.types import Limits, RolloutRequest, SkillFile, SkillVersion
from skillopt.units import MiB

__all__ = [
    "MIN_CPUS",
    "MIN_MEMORY_BYTES",
    "CheckedPackages",
    "approx_size_bytes",
    "check_model_provider",
    "check_skill",
    "check_skill_package",
    "effective_limits",
    "fingerprint",
    "host_cpus",
    "request_fingerprint",
    "validate_limits",
    "validate_request",
]

#: Docker's smallest CPU quota (``nano_cpus`` of 0.01 cores).
MIN_CPUS = 0.01
#: Below this a Python runner with openpyxl cannot even start (and ContainerSpec refuses it).
MIN_MEMORY_BYTES = 32 * MiB
_ROLLOUT_ID = re.compile(r"^[A-Za-z0-9._:/@+-]{1,200}$")
_MAX_MODEL_NAME = 200
_MAX_SHORT_FIELD = 64


def host_cpus() -> float:
    """CPU cores this process may use (affinity-aware): the ceiling of any CPU limit."""
    try:
        return float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return float(os.cpu_count() or 1)


def approx_size_bytes(obj: Any, _depth: int = 0) -> int:
    """Bytes an object of the domain types holds, approximately (strings and byte strings by
    length, a small constant per object). One measure for request payloads and for results kept
    in memory, so neither can grow past its cap unseen."""
    if isinstance(obj, bytes | bytearray | str):
        return len(obj) + 48
    if obj is None or isinstance(obj, bool | int | float):
        return 16
    if isinstance(obj, SkillFile):  # a package's many leaves: skip the generic walk (~6 us each)
        return 64 + len(obj.path) + 48 + len(obj.data) + 48 + 16
    if _depth > 64:  # domain data is shallow; deep nesting only comes from JSON attributes
        return 64
    if is_dataclass(obj) and not isinstance(obj, type):
        return 64 + sum(approx_size_bytes(getattr(obj, f.name), _depth + 1) for f in fields(obj))
    if isinstance(obj, dict) or hasattr(obj, "items"):
        return 64 + sum(
            approx_size_bytes(k, _depth + 1) + approx_size_bytes(v, _depth + 1) for k, v in obj.items()
        )
    if isinstance(obj, list | tuple | set | frozenset):
        return 64 + sum(approx_size_bytes(v, _depth + 1) for v in obj)
    return 64


def request_fingerprint(request: RolloutRequest, *, skill_tree: str = "") -> str:
    """:func:`fingerprint` of a rollout request whose skill package was verified against its
    tree hash on the wire: the package's files stand as that hash (which names every path,
    mode and byte of them), so a retry of a 50-file package is compared in microseconds."""
    if not skill_tree or not request.skill.files:
        return fingerprint(request)
    return fingerprint((replace(request, skill=replace(request.skill, files=())), skill_tree))


def fingerprint(obj: Any) -> str:
    """SHA-256 of a domain object's content (dataclasses, mappings, sequences, scalars), each
    value typed and length-prefixed, so two objects share it exactly when they are equal
    (numbers by value: 60 and 60.0 alike).
    Idempotency compares it between a rollout and a retry of its id. (It replaced a hash of
    the request's deterministic protobuf serialization: 0.72 ms for a 200 KB skill, this walk
    ~0.2 ms.)"""
    digest = hashlib.sha256()
    _feed(digest, obj)
    return digest.hexdigest()


#: Values at least this long are fed as their own SHA-256, memoised by object identity: a
#: corpus file or skill served from the host's blob cache is the same object in every request,
#: so it is hashed once, not once per request.
_BIG = 4096
_BIG_KEPT = 512
#: The memo holds a reference to each object it knows (so that its id is not reused): bounded
#: by bytes too, so that requests sending large files inline cannot pin much memory with it.
_BIG_KEPT_BYTES = 64 * 1024 * 1024
_big_lock = threading.Lock()
_big_digests: OrderedDict[int, tuple[str | bytes, bytes]] = OrderedDict()
_big_bytes = 0


def _big_digest(obj: str | bytes) -> bytes:
    global _big_bytes
    key = id(obj)
    with _big_lock:
        hit = _big_digests.get(key)
        if hit is not None and hit[0] is obj:
            _big_digests.move_to_end(key)
            return hit[1]
    data = obj.encode("utf-8", "surrogatepass") if isinstance(obj, str) else obj
    value = hashlib.sha256(data).digest()
    if len(obj) > _BIG_KEPT_BYTES // 8:
        return value  # too large to keep a reference to
    with _big_lock:
        old = _big_digests.pop(key, None)
        if old is not None:
            _big_bytes -= len(old[0])
        _big_digests[key] = (obj, value)  # the reference keeps id(obj) from being reused
        _big_bytes += len(obj)
        while len(_big_digests) > _BIG_KEPT or _big_bytes > _BIG_KEPT_BYTES:
            _, (gone, _digest) = _big_digests.popitem(last=False)
            _big_bytes -= len(gone)
    return value


def _feed(digest: Any, obj: Any) -> None:
    if isinstance(obj, str | bytes) and len(obj) >= _BIG:
        digest.update(b"h%d:" % len(obj))
        digest.update(_big_digest(obj))
    elif isinstance(obj, str):
        obj = obj.encode("utf-8", "surrogatepass")
        digest.update(b"s%d:" % len(obj))
        digest.update(obj)
    elif isinstance(obj, bytes | bytearray):
        digest.update(b"b%d:" % len(obj))
        digest.update(obj)
    elif obj is None or isinstance(obj, bool | enum.Enum):
        digest.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, int | float):
        # Numbers that compare equal hash equal (a limit of 60 is 60.0 after the wire).
        if isinstance(obj, float) and obj.is_integer():
            obj = int(obj)
        digest.update(f"n:{obj!r};".encode())
    elif is_dataclass(obj) and not isinstance(obj, type):
        # Fields outside __init__ are derived (a skill version's hashes, computed on first
        # use): whether they are filled yet must not change the fingerprint.
        names = [f.name for f in fields(obj) if f.init]
        digest.update(f"{type(obj).__name__}{len(names)}(".encode())
        for name in names:
            digest.update(name.encode() + b"=")
            _feed(digest, getattr(obj, name))
        digest.update(b")")
    elif isinstance(obj, Mapping):
        digest.update(b"m%d{" % len(obj))
        for key in sorted(obj, key=repr):
            _feed(digest, key)
            _feed(digest, obj[key])
        digest.update(b"}")
    elif isinstance(obj, list | tuple):
        digest.update(b"l%d[" % len(obj))
        for item in obj:
            _feed(digest, item)
        digest.update(b"]")
    else:
        raise TypeError(f"cannot fingerprint a {type(obj).__name__}")


def _number(value: float | int | None, field: str, *, minimum: float, floor_note: str = "") -> None:
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidRequest(f"limits.{field} must be a finite number, got {value!r}")
    if value < minimum:
        note = f" ({floor_note})" if floor_note else ""
        raise InvalidRequest(f"limits.{field} must be at least {minimum:g}{note}, got {value!r}")


def validate_limits(limits: Limits) -> None:
    """Refuse limits that are not finite, negative or below a floor (0 / unset = default).

    Raises:
        InvalidRequest: naming the field and the allowed range.
    """
    _number(limits.wall_time_s, "wall_time_s", minimum=0.001)
    _number(limits.exec_timeout_s, "exec_timeout_s", minimum=0.001)
    _number(limits.max_turns, "max_turns", minimum=1)
    _number(limits.memory_bytes, "memory_bytes", minimum=MIN_MEMORY_BYTES, floor_note="32 MiB")
    _number(limits.cpus, "cpus", minimum=MIN_CPUS, floor_note="Docker's smallest CPU quota")
    _number(limits.output_bytes, "output_bytes", minimum=1)
    _number(limits.max_model_tokens, "max_model_tokens", minimum=1)


def _clamp(value: float | int | None, default: float | int | None, maximum: float | int | None):
    v = value if value else default
    if v is None:
        return None
    return min(v, maximum) if maximum else v


def effective_limits(limits: Limits, *, default: Limits, maximum: Limits) -> Limits:
    """The limits a rollout runs with: defaults filled in, each value clamped to the host's
    maximum (CPUs also to the host's cores). ``limits`` must have passed
    :func:`validate_limits`."""
    cpu_max = min(maximum.cpus or host_cpus(), host_cpus())
    cpus = _clamp(limits.cpus, default.cpus, cpu_max)
    return Limits(
        wall_time_s=_clamp(limits.wall_time_s, default.wall_time_s, maximum.wall_time_s),
        max_turns=_clamp(limits.max_turns, default.max_turns, maximum.max_turns),
        exec_timeout_s=_clamp(limits.exec_timeout_s, default.exec_timeout_s, maximum.exec_timeout_s),
        memory_bytes=_clamp(limits.memory_bytes, default.memory_bytes, maximum.memory_bytes),
        cpus=None if cpus is None else min(float(cpus), cpu_max),
        output_bytes=_clamp(limits.output_bytes, default.output_bytes, maximum.output_bytes),
        max_model_tokens=_clamp(limits.max_model_tokens, default.max_model_tokens, maximum.max_model_tokens),
    )


def _validate_model(request: RolloutRequest) -> None:
    m = request.model
    if len(m.provider) > _MAX_MODEL_NAME:
        raise InvalidRequest(
            f"model.provider is longer than {_MAX_MODEL_NAME} characters: {shorten(m.provider)}"
        )
    if len(m.model) > _MAX_MODEL_NAME:
        raise InvalidRequest(f"model.model is longer than {_MAX_MODEL_NAME} characters: {shorten(m.model)}")
    if m.reasoning_effort is not None and len(m.reasoning_effort) > _MAX_SHORT_FIELD:
        raise InvalidRequest(f"model.reasoning_effort is too long: {shorten(m.reasoning_effort)}")
    if m.temperature is not None and not (math.isfinite(m.temperature) and 0.0 <= m.temperature <= 2.0):
        raise InvalidRequest(f"model.temperature must be a number in [0, 2], got {m.temperature!r}")
    if m.max_output_tokens is not None and m.max_output_tokens < 1:
        raise InvalidRequest(f"model.max_output_tokens must be at least 1, got {m.max_output_tokens}")


def _validate_files(request: RolloutRequest, config: ServiceConfig) -> None:
    total = 0
    n_files = 0
    for side, cases in (("task", request.task.cases), ("grading", request.grading.cases)):
        if len(cases) > config.max_cases:
            raise InvalidRequest(f"{side} has {len(cases)} cases; the limit is {config.max_cases}")
        seen: set[str] = set()
        for case in cases:
            check_relative_name(case.name, what=f"{side} case name")
            if case.name in seen:
                raise InvalidRequest(f"{side} case {shorten(case.name)} appears twice")
            seen.add(case.name)
            names: set[str] = set()
            n_files += len(case.files)
            if n_files > config.max_files:
                raise InvalidRequest(
                    f"request has more than {config.max_files} files; the limit is {config.max_files}"
                )
            for f in case.files:
                where = f"{side} file name in case {shorten(case.name, 40)}"
                name = check_relative_name(f.name, what=where)
                if name in names:
                    raise InvalidRequest(
                        f"{side} case {shorten(case.name, 40)}: file {shorten(name)} appears twice"
                    )
                names.add(name)
                if len(f.content) > config.max_file_bytes:
                    raise InvalidRequest(
                        f"{side} file {shorten(case.name + '/' + name)} is {len(f.content)} bytes; "
                        f"the limit is {config.max_file_bytes} bytes"
                    )
                total += len(f.content)
    if total > config.max_request_bytes:
        raise InvalidRequest(
            f"request files total {total} bytes; the limit is {config.max_request_bytes} bytes"
        )


def validate_request(
    request: RolloutRequest,
    config: ServiceConfig,
    *,
    envs: tuple[str, ...],
) -> None:
    """The env-independent checks of a request (names, sizes, limits, model parameters).

    Args:
        envs: env names this host has.

    Raises:
        InvalidRequest: with a message naming the offending field.
    """
    if not _ROLLOUT_ID.match(request.rollout_id):
        raise InvalidRequest(
            f"rollout_id must be 1-200 characters of [A-Za-z0-9._:/@+-], got {shorten(request.rollout_id, 60)}"
        )
    if request.env not in envs:
        raise InvalidRequest(f"unknown env {shorten(request.env)}; available: {', '.join(envs)}")
    if len(request.agent) > _MAX_SHORT_FIELD:
        raise InvalidRequest(f"agent name is too long: {shorten(request.agent)}")
    if request.model_cache not in ("", "off", "record", "replay"):
        raise InvalidRequest(f"model_cache must be off, record or replay, got {shorten(request.model_cache)}")
    size = approx_size_bytes(request)
    skill_bytes = config.max_skill_bytes + config.package_limits.max_bytes
    if size > config.max_request_bytes + skill_bytes + 8 * MiB:
        raise InvalidRequest(
            f"request is about {size} bytes; the limit is {config.max_request_bytes} bytes of files "
            f"plus {skill_bytes} bytes of skill plus 8 MiB of text"
        )
    validate_limits(request.limits)
    _validate_model(request)
    _validate_files(request, config)
    check_skill(request.skill, config)


def check_skill(skill: SkillVersion, config: ServiceConfig) -> None:
    """The checks every skill meets at the door (a package's rules: :func:`check_skill_package`).

    Raises:
        InvalidRequest: SKILL.md is too large, or the name is not one safe folder name.
    """
    if len(skill.content.encode("utf-8")) > config.max_skill_bytes:
        raise InvalidRequest(f"skill is larger than {config.max_skill_bytes} bytes")
    name = skill.name or DEFAULT_SKILL_NAME
    check_relative_name(name, what="skill name")
    # The name is a folder beside others (<workspace>/.claude/skills/<name>/): one component,
    # not hidden, not "." or "..".
    if "/" in name or name.startswith("."):
        raise InvalidRequest(f"skill name must be a single path component, got {shorten(skill.name)}")


def check_skill_package(skill: SkillVersion, limits: PackageLimits) -> None:
    """Refuse a skill package that breaks a rule: the Agent Skills standard's, or ours within
    this host's ``limits`` (:func:`skillopt.skill.package.package_problems`).

    Raises:
        SkillPackageRefused: every problem, each naming its file and rule.
    """
    problems = package_problems(skill, limits)
    if problems:
        listed = "; ".join(str(p) for p in problems[:8])
        more = f"; and {len(problems) - 8} more" if len(problems) > 8 else ""
        raise SkillPackageRefused(
            f"skill package {shorten(skill.name)} refused ({len(problems)} problem(s)): {listed}{more}",
            problems=tuple((p.path, p.rule, p.message) for p in problems),
        )


class CheckedPackages:
    """Skill package versions (name, tree hash) that passed :func:`check_skill_package` under
    this host's ``limits``, so each is checked once: a check costs a few ms (front matter
    parsed, every file decoded), which a version's every rollout would otherwise pay. A
    package without a verified tree hash is checked every time; a one-file skill never."""

    def __init__(self, limits: PackageLimits, *, kept: int = 1024) -> None:
        self.limits = limits
        self.kept = kept
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, skill: SkillVersion, *, skill_tree: str = "") -> None:
        """Raises :class:`SkillPackageRefused` (every problem) for a package that breaks a rule."""
        if not skill.files:
            return
        key = (skill.name, skill_tree)
        with self._lock:
            if skill_tree and key in self._seen:
                self._seen.move_to_end(key)
                return
        check_skill_package(skill, self.limits)
        if skill_tree:
            with self._lock:
                self._seen[key] = None
                while len(self._seen) > self.kept:
                    self._seen.popitem(last=False)


def check_model_provider(
    request: RolloutRequest, env: Environment, providers: Mapping[str, ProviderProfile], *, host_id: str
) -> None:
    """Refuse a request whose model provider is not configured on this host (when its agent
    calls a model), or whose exec agent's CLI speaks another API than the provider.

    Raises:
        InvalidRequest: naming the provider (and the configured ones) or the two APIs.
    """
    if env.container(request.agent) == "gateway":
        wanted = env.agent_apis.get(request.agent)
        profile = providers.get(request.model.provider)
        if (
            wanted
            and profile is not None
            and ("anthropic" if profile.kind == "anthropic" else "openai") != wanted
        ):
            raise InvalidRequest(
                f"agent {request.agent!r} speaks the {wanted} API but provider {profile.name!r} is {profile.kind!r}"
            )
    if env.needs_model and request.model.provider not in providers:
        known = ", ".join(sorted(providers)) or "none configured"
        raise InvalidRequest(
            f"unknown model provider {shorten(request.model.provider)} on host {host_id}; configured: {known}"
        )
