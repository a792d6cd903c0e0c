"""Provider profiles: named endpoints with their keys, configured where the calls are made.

A request only ever names a profile (``ModelSpec.provider``); URL and key live here, on the
calling side, so a remote peer can never point our keys at an endpoint of its choosing.

Sources, later ones overriding earlier ones by name:

1. the environment: ``OPENAI_API_KEY`` gives profile ``openai``;
2. a YAML file::

       providers:
         local-vllm:
           kind: openai_compatible
           base_url: http://10.0.0.5:8000/v1
           api_key_env: VLLM_KEY          # optional; or api_key_file: /run/secrets/vllm
           token_param: max_tokens
3. command-line specs ``name=kind,base_url=URL,api_key_env=VAR``.

A profile whose key variable is unset fails at startup (:func:`resolve_profiles`), not mid-run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from skillopt.errors import ConfigError
from skillopt.models.base import ChatModel

__all__ = ["KINDS", "ProviderProfile", "build_model", "load_profiles", "parse_profile_spec"]

KINDS = ("openai", "openai_compatible")


@dataclass(frozen=True, kw_only=True)
class ProviderProfile:
    """One named model endpoint. ``api_key`` is resolved at startup and never serialized."""

    name: str
    kind: str
    base_url: str | None = None
    api_key_env: str = ""
    api_key_file: str = ""
    token_param: str = "max_completion_tokens"
    max_retries: int = 4
    timeout_s: float = 120.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    api_key: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(
                f"provider {self.name!r}: unknown kind {self.kind!r}; use one of {', '.join(KINDS)}"
            )
        if self.kind == "openai_compatible" and not self.base_url:
            raise ConfigError(f"provider {self.name!r}: kind openai_compatible needs base_url")

    def public(self) -> dict[str, Any]:
        """What may be shown or logged (no key)."""
        return {"name": self.name, "kind": self.kind, "base_url": self.base_url or "(default)"}


def parse_profile_spec(spec: str) -> ProviderProfile:
    """Parse ``name=kind,base_url=URL,api_key_env=VAR[,token_param=max_tokens]``."""
    name, sep, rest = spec.partition("=")
    if not sep or not name:
        raise ConfigError(f"provider spec {spec!r}: expected name=kind[,key=value...]")
    kind, *pairs = rest.split(",")
    values: dict[str, Any] = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep:
            raise ConfigError(f"provider spec {spec!r}: {pair!r} is not key=value")
        values[k.strip()] = v.strip()
    return _profile(name.strip(), {"kind": kind.strip(), **values})


def _profile(name: str, raw: Mapping[str, Any]) -> ProviderProfile:
    allowed = {
        "kind",
        "base_url",
        "api_key_env",
        "api_key_file",
        "token_param",
        "max_retries",
        "timeout_s",
        "extra",
    }
    unknown = set(raw) - allowed
    if unknown:
        raise ConfigError(f"provider {name!r}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    if "api_key" in raw:
        raise ConfigError(
            f"provider {name!r}: put keys in the environment (api_key_env) or a file (api_key_file)"
        )
    values = dict(raw)
    if "max_retries" in values:
        values["max_retries"] = int(values["max_retries"])
    if "timeout_s" in values:
        values["timeout_s"] = float(values["timeout_s"])
    return ProviderProfile(name=name, **values)


def load_profiles(
    *,
    file: str | Path | None = None,
    specs: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, ProviderProfile]:
    """Collect profiles from the environment, a YAML file and CLI specs, then resolve keys.

    Raises:
        ConfigError: a malformed profile or a key that is configured but missing.
    """
    env = os.environ if environ is None else environ
    profiles: dict[str, ProviderProfile] = {}
    if env.get("OPENAI_API_KEY"):
        profiles["openai"] = ProviderProfile(
            name="openai",
            kind="openai",
            base_url=env.get("OPENAI_BASE_URL") or None,
            api_key_env="OPENAI_API_KEY",
        )
    if file:
        data = yaml.safe_load(Path(file).read_text()) or {}
        if not isinstance(data, dict) or not isinstance(data.get("providers", {}), dict):
            raise ConfigError(f"{file}: expected a mapping with a 'providers' mapping")
        for name, raw in (data.get("providers") or {}).items():
            if not isinstance(raw, dict):
                raise ConfigError(f"{file}: provider {name!r} must be a mapping")
            profiles[name] = _profile(name, raw)
    for spec in specs:
        p = parse_profile_spec(spec)
        profiles[p.name] = p
    return {name: _resolve_key(p, env) for name, p in profiles.items()}


def _resolve_key(profile: ProviderProfile, env: Mapping[str, str]) -> ProviderProfile:
    if profile.api_key_file:
        try:
            key = Path(profile.api_key_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"provider {profile.name!r}: cannot read api_key_file: {exc}") from exc
        return replace(profile, api_key=key)
    if profile.api_key_env:
        key = env.get(profile.api_key_env, "")
        if not key:
            raise ConfigError(
                f"provider {profile.name!r}: environment variable {profile.api_key_env} is not set; "
                "export it on the host that makes the calls"
            )
        return replace(profile, api_key=key)
    if profile.kind == "openai":
        raise ConfigError(f"provider {profile.name!r}: kind openai needs api_key_env or api_key_file")
    return profile  # local compatible servers often need no key


def build_model(profile: ProviderProfile) -> ChatModel:
    """Instantiate the SDK client for a profile."""
    from skillopt.models.openai_chat import OpenAIChatModel

    return OpenAIChatModel(
        profile.name,
        base_url=profile.base_url,
        api_key=profile.api_key,
        max_retries=profile.max_retries,
        timeout_s=profile.timeout_s,
        token_param=profile.token_param,
        default_extra=profile.extra,
    )
