"""Which provider each model role of a config resolves to, whether it can work on this machine
(and on each sandbox host), and, when asked, one tiny real call to each (``skillopt models
check``).

The roles are the run's: the **optimizer** (called from this machine, the controller) and the
**target** (called by the sandbox hosts, through their gateway; the embedded sandbox runs on
this machine). Profiles are resolved exactly as a run resolves them
(:func:`skillopt.models.profiles.load_profiles` over ``model.providers_file`` and the
environment), and a call goes through the same SDK path as a run's
(:func:`skillopt.models.profiles.build_model`). Keys are never shown: only where they come from.

Usage::

    checks = check_roles(cfg, call=True)
    bad = [c for c in checks if not c.ok]
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from skillopt.config import Config
from skillopt.errors import ConfigError, ModelError
from skillopt.models.profiles import ProviderProfile

__all__ = [
    "CALL_STAGE",
    "CallResult",
    "HostCheck",
    "RoleCheck",
    "check_hosts",
    "check_roles",
    "problems_of",
    "roles_of",
]

#: The stage header of a check's call (``X-Skillopt-Stage``), so gateways and logs can tell it.
CALL_STAGE = "models_check"
_PROMPT = "This is a connectivity check. Reply with the single word: ok"
_ANTHROPIC_BASE_URL = "https://api.anthropic.com"  # the anthropic SDK's default
_MAX_OUTPUT_TOKENS = 256  # room for a reasoning model's short thought before "ok"


@dataclass(frozen=True, kw_only=True)
class CallResult:
    """One tiny call: ``ok``, its wall time, the reply's first characters or the error."""

    ok: bool
    seconds: float
    reply: str = ""
    error: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "seconds": round(self.seconds, 3), "reply": self.reply, "error": self.error}


@dataclass(frozen=True, kw_only=True)
class RoleCheck:
    """One role as this machine resolves it.

    Attributes:
        role: ``optimizer`` or ``target``.
        provider: the profile name the config gives the role.
        model: the model name.
        called_from: who makes the role's calls (this machine, or the sandbox hosts).
        profile: the profile's public view (kind, API, base URL, where the key comes from), or
            empty when there is no such profile.
        key: ``set``, ``not needed`` or ``missing``.
        problem: why the role cannot work ("" = it can), with what to do.
        call: the tiny call's result, when one was made.
    """

    role: str
    provider: str
    model: str
    called_from: str
    profile: Mapping[str, Any] = field(default_factory=dict)
    key: str = "missing"
    problem: str = ""
    call: CallResult | None = None

    @property
    def ok(self) -> bool:
        return not self.problem and (self.call is None or self.call.ok)

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "provider": self.provider,
            "model": self.model,
            "called_from": self.called_from,
            "profile": dict(self.profile),
            "key": self.key,
            "ok": self.ok,
            "problem": self.problem,
            "call": self.call.to_json() if self.call is not None else None,
        }


@dataclass(frozen=True, kw_only=True)
class HostCheck:
    """A sandbox host: reachable or not, the profiles it serves, and whether it serves the
    target's (a host loads a profile only when its key is there, so a served profile has its
    key on that host)."""

    address: str
    host: str
    health: str
    providers: tuple[str, ...]
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem

    def to_json(self) -> dict[str, Any]:
        return {
            "address": self.address,
            "host": self.host,
            "health": self.health,
            "providers": list(self.providers),
            "ok": self.ok,
            "problem": self.problem,
        }


def roles_of(cfg: Config) -> list[tuple[str, str, str, str]]:
    """``(role, provider, model, called_from)`` of every model role of the config."""
    m = cfg.model
    target_from = (
        f"the sandbox hosts ({', '.join(cfg.sandbox.endpoints)})"
        if cfg.sandbox.endpoints
        else "the embedded sandbox on this machine"
    )
    return [
        ("optimizer", m.optimizer_provider, m.optimizer, "this machine (the controller)"),
        ("target", m.target_provider, m.target, target_from),
    ]


def _agent_api(cfg: Config) -> tuple[str, str]:
    """``(agent, the wire API its CLI speaks)``; API ``""`` = any (the service calls the model)."""
    from skillopt.envs.registry import env_spec

    spec = env_spec(cfg.env.name)
    agent = cfg.env.agent or spec.default_agent
    return agent, spec.agent(agent).api


def check_roles(
    cfg: Config,
    *,
    call: bool = False,
    timeout_s: float = 60.0,
    environ: Mapping[str, str] | None = None,
) -> list[RoleCheck]:
    """Resolve every role's provider on this machine; with ``call``, one tiny call to each.

    Never raises for a role that cannot work: its ``problem`` says why and what to set.

    Raises:
        ConfigError: the providers file cannot be read or holds a malformed profile.
    """
    from skillopt.models.profiles import load_profiles

    profiles = load_profiles(file=cfg.model.providers_file or None, environ=environ, resolve=False)
    agent, api = _agent_api(cfg)
    out = []
    for role, provider, model, called_from in roles_of(cfg):
        check = _check_one(profiles, role, provider, model, called_from, environ)
        if role == "target" and api and check.profile and not check.problem:
            speaks = "anthropic" if check.profile["kind"] == "anthropic" else "openai"
            if speaks != api:
                check = replace(
                    check,
                    problem=f"agent {agent} speaks the {api} API but provider {provider!r} is "
                    f"{check.profile['kind']}; give the target a profile of kind "
                    + ("anthropic" if api == "anthropic" else "openai, openai_compatible or azure_openai"),
                )
        if call and not check.problem:
            check = replace(check, call=_call(profiles[provider], check, cfg, timeout_s, environ))
        out.append(check)
    return out


def _check_one(
    profiles: Mapping[str, ProviderProfile],
    role: str,
    provider: str,
    model: str,
    called_from: str,
    environ: Mapping[str, str] | None,
) -> RoleCheck:
    from skillopt.models.profiles import KINDS, build_model, resolve_secrets, validate_profiles

    base = RoleCheck(role=role, provider=provider, model=model, called_from=called_from)
    if provider not in profiles:
        try:
            validate_profiles(profiles, [provider], environ=environ)
        except ConfigError as exc:
            return replace(base, problem=exc.message)
    profile = profiles[provider]
    public = {**profile.public(), "base_url": _base_url(profile)}
    base = replace(base, profile=public)
    try:
        resolved = resolve_secrets(profile, environ)
    except ConfigError as exc:
        return replace(base, key="missing", problem=exc.message)
    needs = KINDS[profile.kind].key
    has_key = bool(resolved.api_key or resolved.ad_token) or public["credential"] == "entra_id"
    key = "set" if has_key else ("not needed" if needs in ("optional", "unless_base_url") else "missing")
    try:
        build_model(resolved)  # the SDK client, as a run builds it (no network traffic)
    except ConfigError as exc:
        return replace(base, key=key, problem=exc.message)
    return replace(base, key=key)


def _base_url(profile: ProviderProfile) -> str:
    """Where the profile's calls go, the SDK's default spelled out when the profile has none."""
    from skillopt.models.openai_chat import OPENAI_BASE_URL

    if profile.azure_endpoint or profile.base_url:
        return profile.endpoint
    return _ANTHROPIC_BASE_URL if profile.kind == "anthropic" else OPENAI_BASE_URL


def _call(
    profile: ProviderProfile,
    check: RoleCheck,
    cfg: Config,
    timeout_s: float,
    environ: Mapping[str, str] | None,
) -> CallResult:
    """One short chat call with the role's own sampling settings (so a setting the model
    refuses shows here), one SDK retry at most."""
    from skillopt.models.base import ChatRequest
    from skillopt.models.profiles import build_model, resolve_secrets
    from skillopt.types import Message

    m = cfg.model
    model = build_model(replace(resolve_secrets(profile, environ), max_retries=1, timeout_s=timeout_s))
    request = ChatRequest(
        model=check.model,
        messages=(Message(role="user", content=_PROMPT),),
        temperature=m.optimizer_temperature if check.role == "optimizer" else m.target_temperature,
        max_output_tokens=_MAX_OUTPUT_TOKENS,
        reasoning_effort=m.reasoning_effort or None,
        timeout_s=timeout_s,
        stage=CALL_STAGE,
    )
    t0 = time.monotonic()
    try:
        reply = model.complete(request)
    except (ModelError, ConfigError) as exc:
        return CallResult(ok=False, seconds=time.monotonic() - t0, error=exc.message)
    return CallResult(ok=True, seconds=time.monotonic() - t0, reply=" ".join(reply.text.split())[:60])


def check_hosts(cfg: Config, *, timeout_s: float = 5.0) -> list[HostCheck]:
    """Every configured sandbox host (``sandbox.endpoints``, with the run's token and TLS):
    reachable, and serving the target's provider profile.

    Raises:
        ConfigError: a malformed endpoint, or an unreadable token file.
    """
    if not cfg.sandbox.endpoints:
        return []
    from controller.fleet.status import probe_fleet
    from controller.session import sandbox_channels

    try:
        channels = sandbox_channels(cfg)
    except OSError as exc:
        raise ConfigError(f"cannot read sandbox.token_file {cfg.sandbox.token_file}: {exc.strerror}") from exc
    target = cfg.model.target_provider
    out = []
    for r in probe_fleet(channels, timeout_s=timeout_s):
        problem = ""
        if not r.host:
            problem = f"unreachable ({r.error or r.health}); check the address, token and TLS settings"
        elif target not in r.providers:
            problem = (
                f"serves no provider profile {target!r} for the target (serves: "
                f"{', '.join(r.providers) or 'none'}); start it with its key in the environment and "
                "skillopt serve --providers FILE (or --provider NAME=KIND,...)"
            )
        out.append(
            HostCheck(address=r.address, host=r.host, health=r.health, providers=r.providers, problem=problem)
        )
    return out


def problems_of(roles: Sequence[RoleCheck], hosts: Sequence[HostCheck]) -> list[str]:
    """One line per role or host that cannot work."""
    out = [f"{c.role}: {c.problem or (c.call.error if c.call else '')}" for c in roles if not c.ok]
    out += [f"host {h.address}: {h.problem}" for h in hosts if not h.ok]
    return out
