"""What a session may ask for on this host: a :class:`SessionRequest` checked and resolved into a
container spec, limits, TTLs, labels and files, and each command's bounds (timeout, output cap,
stdin, user). Pure checks over the host's :class:`~sandbox.service.config.SessionConfig`; the
:class:`~sandbox.service.sessions.SessionManager` holds the state."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from sandbox.runtime.spec import ContainerSpec
from sandbox.service.config import SessionConfig
from sandbox.service.validation import effective_limits, validate_limits
from skillopt.errors import InvalidRequest, SandboxFileTooLarge, UserUnsupported
from skillopt.files import check_relative_name
from skillopt.types import Limits, SkillVersion

__all__ = ["SESSION_USER", "Admitted", "SessionPolicy", "SessionRequest"]

_MAX_LABEL_CHARS = 200
#: The container user's name in the runtime image (uid 1000).
SESSION_USER = "sandbox"


@dataclass(frozen=True, kw_only=True)
class SessionRequest:
    """What a client asks for when it creates a session (already decoded from the proto)."""

    image: str = ""
    limits: Limits = field(default_factory=Limits)
    idle_ttl_s: float = 0.0
    max_lifetime_s: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    network: str = "none"
    #: Mounted read-only at /skill (and where agent CLIs look, on the gateway network);
    #: already checked like a rollout's skill.
    skill: SkillVersion | None = None
    files: tuple[tuple[str, bytes], ...] = ()
    #: The workspace allows executing files (code runs of compiled languages; never from a
    #: client's CreateSession).
    workspace_exec: bool = False
    #: The isolation the client requires of the container ("" = any, ``gvisor``): refused
    #: before any container is taken when this host's would not give it.
    isolation: str = ""


@dataclass(frozen=True, kw_only=True)
class Admitted:
    """A session request as this host grants it."""

    spec: ContainerSpec
    limits: Limits
    network: str
    idle_ttl_s: float
    lifetime_s: float
    labels: dict[str, str]
    files: list[tuple[str, bytes]]


class SessionPolicy:
    """The host's rules for sessions.

    Args:
        config: the host's session policy.
        host_id: this host's id (named in refusals).
        base_spec: the host's rollout container spec (sessions with default limits share its
            warm pool).
        gateway_spec: the spec of containers on the model gateway's network (``None``: this
            host offers no gateway network).
        default_limits, max_limits: the host's rollout limits (memory, CPUs) that sessions use.
        max_lifetime_cap_s: no session lives longer (the runtime's container lifetime).
    """

    def __init__(
        self,
        config: SessionConfig,
        *,
        host_id: str,
        base_spec: ContainerSpec,
        gateway_spec: ContainerSpec | None,
        default_limits: Limits,
        max_limits: Limits,
        max_lifetime_cap_s: float,
    ) -> None:
        self.config = config
        self.host_id = host_id
        self.base_spec, self.gateway_spec = base_spec, gateway_spec
        self.default_limits, self.max_limits = default_limits, max_limits
        self.max_lifetime_cap_s = max_lifetime_cap_s

    @property
    def images(self) -> tuple[str, ...]:
        """The images sessions may use: the host's runtime image first."""
        return (self.base_spec.image, *(i for i in self.config.extra_images if i != self.base_spec.image))

    def admit(self, request: SessionRequest) -> Admitted:
        """``request`` as this host grants it.

        Raises:
            InvalidRequest: an image off the allow-list, an unknown network, bad limits, TTLs,
                labels or file names.
            SandboxFileTooLarge: files beyond the host's limit.
        """
        spec, limits = self._spec_for(request)
        idle_ttl = self.idle_ttl(request.idle_ttl_s)
        lifetime = min(request.max_lifetime_s or self.config.default_max_lifetime_s, self.max_lifetime_cap_s)
        if lifetime < 1.0:
            raise InvalidRequest(f"max_lifetime_s must be at least 1 s, got {request.max_lifetime_s:g}")
        return Admitted(
            spec=spec,
            limits=limits,
            network=request.network or "none",
            idle_ttl_s=idle_ttl,
            lifetime_s=lifetime,
            labels=self._labels(request.labels),
            files=self._files(request.files),
        )

    def idle_ttl(self, asked: float) -> float:
        return _bounded(asked, self.config.default_idle_ttl_s, self.config.max_idle_ttl_s, "idle_ttl_s")

    def exec_timeout(self, asked: float) -> float:
        return _bounded(
            asked, self.config.default_exec_timeout_s, self.config.max_exec_timeout_s, "timeout_s"
        )

    def output_cap(self, asked: int) -> int:
        return int(
            _bounded(
                asked, self.config.default_output_bytes, self.config.max_output_bytes, "output_limit_bytes"
            )
        )

    def check_command(self, *, user: str, stdin_bytes: int) -> None:
        """Refuse a command this host cannot run as asked.

        Raises:
            UserUnsupported: ``user`` names someone other than the session's user.
            InvalidRequest: stdin beyond the host's limit.
        """
        uid = self.base_spec.user.split(":", 1)[0]
        if user and user not in (SESSION_USER, uid):
            raise UserUnsupported(
                f"cannot run as user {user!r}: session containers run as {SESSION_USER!r} (uid "
                f"{uid}) without the capability to switch users"
            )
        if stdin_bytes > self.config.max_stdin_bytes:
            raise InvalidRequest(
                f"stdin of {stdin_bytes} bytes exceeds this host's {self.config.max_stdin_bytes}"
            )

    def check_file_size(self, size: int) -> None:
        if size > self.config.max_file_bytes:
            raise SandboxFileTooLarge(
                f"a file of {size} bytes exceeds this host's limit of {self.config.max_file_bytes}"
            )

    def _spec_for(self, request: SessionRequest) -> tuple[ContainerSpec, Limits]:
        image = request.image or self.base_spec.image
        if image not in self.images:
            raise InvalidRequest(
                f"image {image[:200]!r} is not allowed on this host; allowed: {', '.join(self.images)}"
            )
        network = request.network or "none"
        if network not in ("none", "gateway"):
            raise InvalidRequest(f"network must be 'none' or 'gateway', got {network[:50]!r}")
        validate_limits(request.limits)
        asked = Limits(
            memory_bytes=request.limits.memory_bytes,
            cpus=request.limits.cpus,
            output_bytes=request.limits.output_bytes,
        )
        if network == "gateway":
            if self.gateway_spec is None:
                raise InvalidRequest(
                    f"host {self.host_id} has no model gateway network (exec agents are off here)"
                )
            base = self.gateway_spec
        else:
            base = self.base_spec
        # Unset limits are the spec's own, so a default session takes a warm pool's container.
        default = replace(
            self.default_limits,
            memory_bytes=base.memory_bytes,
            cpus=base.cpus,
            output_bytes=self.config.default_output_bytes,
        )
        maximum = replace(self.max_limits, output_bytes=self.config.max_output_bytes)
        limits = effective_limits(asked, default=default, maximum=maximum)
        spec = replace(base, image=image, workspace_exec=request.workspace_exec).with_limits(
            memory_bytes=limits.memory_bytes, cpus=limits.cpus
        )
        return spec, limits

    def _labels(self, labels: Mapping[str, str]) -> dict[str, str]:
        if len(labels) > self.config.max_labels:
            raise InvalidRequest(f"at most {self.config.max_labels} labels, got {len(labels)}")
        for key, value in labels.items():
            if not key or len(key) > _MAX_LABEL_CHARS or len(value) > _MAX_LABEL_CHARS:
                raise InvalidRequest(
                    f"label keys must be 1-{_MAX_LABEL_CHARS} characters and values at most that"
                )
        return dict(labels)

    def _files(self, files: tuple[tuple[str, bytes], ...]) -> list[tuple[str, bytes]]:
        total = 0
        checked = []
        for name, data in files:
            checked.append((check_relative_name(name), data))
            total += len(data)
        self.check_file_size(total)
        return checked


def _bounded(value: float, default: float, maximum: float, name: str) -> float:
    if value != value or value < 0 or value == float("inf"):
        raise InvalidRequest(f"{name} must be a finite number >= 0, got {value!r}")
    return min(float(value or default), maximum)
