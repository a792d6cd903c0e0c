"""Provider profiles: named endpoints with their keys, configured where the calls are made.

A request only ever names a profile (``ModelSpec.provider``); URL and key live here, on the
calling side, so a remote peer can never point our keys at an endpoint of its choosing.

Sources, later ones overriding earlier ones by name:

1. the environment: ``OPENAI_API_KEY`` (+ ``OPENAI_BASE_URL``) gives profile ``openai``;
   ``ANTHROPIC_API_KEY`` (+ ``ANTHROPIC_BASE_URL``) gives ``anthropic``;
   ``AZURE_OPENAI_ENDPOINT`` + ``AZURE_OPENAI_API_KEY`` (+ ``AZURE_OPENAI_API_VERSION``) give
   ``azure``;
2. a YAML file::

       providers:
         local-vllm:                      # vLLM serving Qwen
           kind: openai_compatible
           base_url: http://10.0.0.5:8000/v1
           api_key_env: VLLM_KEY          # optional; or api_key_file: /run/secrets/vllm
           token_param: max_tokens        # or max_completion_tokens (the default)
           thinking: disabled             # server_default (omit) | enabled | disabled
         openai:
           kind: openai
           api_key_env: OPENAI_API_KEY
           api: auto                      # auto (Responses for *-codex ...) | chat | responses
         azure:
           kind: azure_openai
           azure_endpoint: https://my-res.openai.azure.com
           api_version: 2024-12-01-preview
           api_key_env: AZURE_OPENAI_API_KEY   # or azure_ad_token_env: VAR, or auth: entra_id
           deployments: {gpt-5.5: prod-gpt55}  # model name → deployment (default: the same name)
         claude:
           kind: anthropic
           api_key_env: ANTHROPIC_API_KEY
           max_tokens: 8192               # default when a call gives no limit
           thinking_budget_tokens: 4096   # extended thinking (0 = off)
3. command-line specs ``name=kind,base_url=URL,api_key_env=VAR[,option=value...]``.

Every option, and which kinds take it, is on :class:`ProviderProfile`; a profile with an option
its kind does not take, or a key variable that is unset, fails at startup (:func:`load_profiles`,
:func:`validate_profiles`), not mid-run. Keys are never shown: not in ``repr``, not in
:meth:`ProviderProfile.public`, not in error messages.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from skillopt.errors import ConfigError
from skillopt.models.base import ChatModel
from skillopt.models.providers import KINDS, kind_of, model_class

__all__ = [
    "API_MODES",
    "KINDS",
    "THINKING_MODES",
    "TOKEN_PARAMS",
    "ProviderProfile",
    "build_model",
    "load_profiles",
    "parse_profile_spec",
    "resolve_secrets",
    "validate_profiles",
]

API_MODES = ("auto", "chat", "responses")
TOKEN_PARAMS = ("max_completion_tokens", "max_tokens")
THINKING_MODES = ("server_default", "enabled", "disabled")
AZURE_AUTH = ("api_key", "ad_token", "entra_id")
DEFAULT_AZURE_API_VERSION = "2024-12-01-preview"
DEFAULT_AZURE_RESPONSES_API_VERSION = "2025-04-01-preview"
DEFAULT_ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
ANTHROPIC_MIN_THINKING_BUDGET = 1024  # the Messages API refuses smaller budgets

_INT_OPTIONS = frozenset({"max_retries", "max_tokens", "thinking_budget_tokens"})
_FLOAT_OPTIONS = frozenset({"timeout_s"})
_MAP_OPTIONS = frozenset({"extra", "deployments"})
_SECRET_OPTIONS = ("api_key", "azure_ad_token", "ad_token", "token", "password")


@dataclass(frozen=True, kw_only=True)
class ProviderProfile:
    """One named model endpoint. Secrets (``api_key``, ``ad_token``) are resolved at startup,
    excluded from ``repr`` and equality, and never serialized.

    Options (and the kinds that take them):
        base_url: endpoint root ending in ``/v1`` (all but azure_openai; required for
            openai_compatible; None = the provider's public endpoint).
        api_key_env, api_key_file: where the key comes from (one of them; all kinds).
        max_retries: the SDK's retries on 429/5xx/timeouts/connection errors (all kinds).
        timeout_s: default per-attempt timeout of a call in seconds (all kinds).
        extra: extra body fields sent on every call (all kinds), e.g. vLLM ``top_k``.
        api: ``auto`` | ``chat`` | ``responses`` (openai, openai_compatible, azure_openai);
            "" = the kind's default (openai/azure: auto, compatible: chat).
        token_param: ``max_completion_tokens`` | ``max_tokens`` (Chat Completions kinds).
        thinking: ``server_default`` | ``enabled`` | ``disabled``: Qwen's
            ``chat_template_kwargs.enable_thinking`` (openai_compatible).
        azure_endpoint, api_version, responses_api_version, deployments (model → deployment),
            azure_ad_token_env, auth (``api_key`` | ``ad_token`` | ``entra_id``), entra_scope:
            azure_openai.
        max_tokens, thinking_budget_tokens: anthropic.
    """

    name: str
    kind: str
    base_url: str | None = None
    api_key_env: str = ""
    api_key_file: str = ""
    max_retries: int = 4
    timeout_s: float = 120.0
    extra: Mapping[str, Any] = field(default_factory=dict)
    api: str = ""
    token_param: str = "max_completion_tokens"
    thinking: str = "server_default"
    azure_endpoint: str = ""
    api_version: str = DEFAULT_AZURE_API_VERSION
    responses_api_version: str = DEFAULT_AZURE_RESPONSES_API_VERSION
    deployments: Mapping[str, str] = field(default_factory=dict)
    azure_ad_token_env: str = ""
    auth: str = ""
    entra_scope: str = DEFAULT_ENTRA_SCOPE
    max_tokens: int = 8192
    thinking_budget_tokens: int = 0
    api_key: str = field(default="", repr=False, compare=False)
    ad_token: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        kind = kind_of(self.kind, profile=self.name)
        where = f"provider {self.name!r} (kind {self.kind})"
        defaults = {f.name: f for f in fields(self)}
        for f in defaults.values():
            if f.name in ("name", "kind", "api_key", "ad_token") or f.name in kind.options:
                continue
            default = f.default_factory() if callable(f.default_factory) else f.default
            if getattr(self, f.name) != default:
                raise ConfigError(_not_an_option(where, f.name, kind.name, kind.options))
        if self.max_retries < 0:
            raise ConfigError(f"{where}: max_retries must be >= 0, got {self.max_retries}")
        if not self.timeout_s > 0:
            raise ConfigError(f"{where}: timeout_s must be > 0 (seconds), got {self.timeout_s}")
        if self.api_key_env and self.api_key_file:
            raise ConfigError(f"{where}: set api_key_env or api_key_file, not both")
        if kind.default_api:
            self._check_api(where, kind.default_api)
        _check_choice(where, "token_param", self.token_param, TOKEN_PARAMS)
        _check_choice(where, "thinking", self.thinking, THINKING_MODES)
        if self.kind == "openai_compatible":
            if not self.base_url:
                raise ConfigError(f"{where}: set base_url (the server's root ending in /v1)")
            self._check_thinking(where)
        if self.kind == "azure_openai":
            self._check_azure(where)
        if self.kind == "anthropic":
            if self.max_tokens < 1:
                raise ConfigError(f"{where}: max_tokens must be >= 1, got {self.max_tokens}")
            budget = self.thinking_budget_tokens
            if budget and budget < ANTHROPIC_MIN_THINKING_BUDGET:
                raise ConfigError(
                    f"{where}: thinking_budget_tokens must be 0 (off) or >= "
                    f"{ANTHROPIC_MIN_THINKING_BUDGET}, got {budget}"
                )

    def _check_api(self, where: str, default_api: str) -> None:
        api = self.api or default_api
        _check_choice(where, "api", api, API_MODES)
        if self.kind == "openai_responses" and api != "responses":
            raise ConfigError(f"{where}: kind openai_responses always uses api: responses")
        object.__setattr__(self, "api", api)

    def _check_thinking(self, where: str) -> None:
        if self.thinking != "server_default" and self.api != "chat":
            raise ConfigError(
                f"{where}: thinking ({self.thinking}) is sent as chat_template_kwargs, which only "
                "Chat Completions take; set api: chat or thinking: server_default"
            )
        template = self.extra.get("chat_template_kwargs")
        if self.thinking == "server_default" or not isinstance(template, Mapping):
            return
        if "enable_thinking" in template and bool(template["enable_thinking"]) != (
            self.thinking == "enabled"
        ):
            raise ConfigError(
                f"{where}: thinking: {self.thinking} conflicts with "
                f"extra.chat_template_kwargs.enable_thinking={template['enable_thinking']!r}; keep one"
            )

    def _check_azure(self, where: str) -> None:
        from skillopt.models.azure_openai import check_token_endpoint

        if not self.azure_endpoint:
            raise ConfigError(
                f"{where}: set azure_endpoint (https://<resource>.openai.azure.com), "
                "or AZURE_OPENAI_ENDPOINT for the automatic profile 'azure'"
            )
        if not self.api_version:
            raise ConfigError(f"{where}: api_version must not be empty (e.g. {DEFAULT_AZURE_API_VERSION})")
        for model, deployment in self.deployments.items():
            if not isinstance(deployment, str) or not deployment:
                raise ConfigError(f"{where}: deployments.{model} must be a deployment name")
        sources = {
            "api_key": bool(self.api_key_env or self.api_key_file),
            "ad_token": bool(self.azure_ad_token_env),
        }
        given = [k for k, v in sources.items() if v]
        if len(given) > 1:
            raise ConfigError(f"{where}: set one credential: api_key_env/api_key_file or azure_ad_token_env")
        auth = self.auth or (given[0] if given else "")
        if not auth:
            raise ConfigError(
                f"{where}: say how to authenticate: api_key_env: VAR (or api_key_file) for a key, "
                "azure_ad_token_env: VAR for a static Entra token, or auth: entra_id for "
                "azure-identity's DefaultAzureCredential"
            )
        _check_choice(where, "auth", auth, AZURE_AUTH)
        if (auth == "api_key" and not sources["api_key"] and not self.api_key) or (
            auth == "ad_token" and not sources["ad_token"] and not self.ad_token
        ):
            need = "api_key_env or api_key_file" if auth == "api_key" else "azure_ad_token_env"
            raise ConfigError(f"{where}: auth {auth} needs {need}")
        if auth == "entra_id" and given:
            raise ConfigError(f"{where}: auth entra_id takes no api_key_env/api_key_file/azure_ad_token_env")
        if auth in ("ad_token", "entra_id"):
            check_token_endpoint(self.azure_endpoint, profile=self.name)
        object.__setattr__(self, "auth", auth)

    def __repr__(self) -> str:
        """Name, kind and the options that differ from their defaults; never a secret."""
        options = KINDS[self.kind].options | {"api", "auth"}
        shown = [f"name={self.name!r}", f"kind={self.kind!r}"]
        for f in fields(self):
            if f.name not in options:
                continue
            value = getattr(self, f.name)
            default = f.default_factory() if callable(f.default_factory) else f.default
            if value != default:
                shown.append(f"{f.name}={value!r}")
        return f"ProviderProfile({', '.join(shown)})"

    @property
    def endpoint(self) -> str:
        """Where the calls go (shown in logs and errors)."""
        return self.azure_endpoint or self.base_url or "(the provider's default endpoint)"

    def public(self) -> dict[str, Any]:
        """What may be shown or logged: endpoint, API, modes and where the key comes from (never
        the key itself)."""
        out: dict[str, Any] = {"name": self.name, "kind": self.kind, "base_url": self.endpoint}
        if self.api:
            out["api"] = self.api
        if self.kind == "openai_compatible":
            out["thinking"] = self.thinking
        if self.kind == "azure_openai":
            out.update(api_version=self.api_version, auth=self.auth)
            if self.deployments:
                out["deployments"] = dict(self.deployments)
        if self.kind == "anthropic":
            out.update(max_tokens=self.max_tokens, thinking_budget_tokens=self.thinking_budget_tokens)
        source = self.api_key_env or self.api_key_file or self.azure_ad_token_env
        out["credential"] = source or ("entra_id" if self.auth == "entra_id" else "none")
        return out


def _check_choice(where: str, option: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        hint = ""
        if isinstance(value, bool) and option == "thinking":
            # YAML reads `thinking: false` as a boolean; the old boolean meant "omit" for false,
            # which surprised users, so it is refused rather than guessed (reference #240).
            hint = " (a boolean is ambiguous: write enabled, disabled or server_default)"
        raise ConfigError(f"{where}: {option} must be one of {', '.join(allowed)}, got {value!r}{hint}")


def _not_an_option(where: str, option: str, kind: str, options: Iterable[str]) -> str:
    takers = [k for k, v in KINDS.items() if option in v.options]
    also = f"; {option} is an option of {', '.join(takers)}" if takers else ""
    if option == "base_url" and kind == "azure_openai":
        also = "; Azure takes azure_endpoint (https://<resource>.openai.azure.com)"
    return f"{where}: unknown option {option!r}; options of {kind}: {', '.join(sorted(options))}{also}"


def _coerce(name: str, option: str, value: Any) -> Any:
    where = f"provider {name!r}: {option}"
    if option in _INT_OPTIONS:
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ConfigError(f"{where} must be an integer, got {value!r}")
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{where} must be an integer, got {value!r}") from None
    if option in _FLOAT_OPTIONS:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ConfigError(f"{where} must be a number, got {value!r}")
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"{where} must be a number, got {value!r}") from None
    if option in _MAP_OPTIONS:
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise ConfigError(f"{where} must be a mapping with string keys, got {value!r}")
        return dict(value)
    if option == "thinking" and isinstance(value, bool):
        return value  # refused with a hint by the profile's own check
    if isinstance(value, datetime.date):
        return value.isoformat()  # YAML reads `api_version: 2024-10-21` as a date
    if isinstance(value, bool) or value is None or not isinstance(value, str | int | float):
        raise ConfigError(f"{where} must be a string, got {value!r}")
    return str(value)


def _profile(name: str, raw: Mapping[str, Any]) -> ProviderProfile:
    for secret in _SECRET_OPTIONS:
        if secret in raw:
            raise ConfigError(
                f"provider {name!r}: do not put secrets in the config ({secret}); name an environment "
                "variable (api_key_env / azure_ad_token_env) or a file (api_key_file)"
            )
    if "kind" not in raw:
        raise ConfigError(f"provider {name!r}: set kind (one of {', '.join(KINDS)})")
    kind = kind_of(str(raw["kind"]), profile=name)
    unknown = sorted(set(raw) - kind.options - {"kind"})
    if unknown:
        raise ConfigError(
            _not_an_option(f"provider {name!r} (kind {kind.name})", unknown[0], kind.name, kind.options)
        )
    values = {k: _coerce(name, k, v) for k, v in raw.items() if k != "kind"}
    return ProviderProfile(name=name, kind=kind.name, **values)


def parse_profile_spec(spec: str) -> ProviderProfile:
    """Parse ``name=kind,base_url=URL,api_key_env=VAR[,token_param=max_tokens]``.

    Mapping options (``extra``, ``deployments``) need the providers file.
    """
    name, sep, rest = spec.partition("=")
    if not sep or not name:
        raise ConfigError(f"provider spec {spec!r}: expected name=kind[,key=value...]")
    kind, *pairs = rest.split(",")
    values: dict[str, Any] = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep:
            raise ConfigError(f"provider spec {spec!r}: {pair!r} is not key=value")
        if k.strip() in _MAP_OPTIONS:
            raise ConfigError(
                f"provider spec {spec!r}: {k.strip()} is a mapping; set it in the providers file"
            )
        values[k.strip()] = v.strip()
    return _profile(name.strip(), {"kind": kind.strip(), **values})


def _env_profiles(env: Mapping[str, str]) -> dict[str, ProviderProfile]:
    out: dict[str, ProviderProfile] = {}
    if env.get("OPENAI_API_KEY"):
        out["openai"] = ProviderProfile(
            name="openai",
            kind="openai",
            base_url=env.get("OPENAI_BASE_URL") or None,
            api_key_env="OPENAI_API_KEY",
        )
    if env.get("ANTHROPIC_API_KEY"):
        out["anthropic"] = ProviderProfile(
            name="anthropic",
            kind="anthropic",
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
            api_key_env="ANTHROPIC_API_KEY",
        )
    if env.get("AZURE_OPENAI_ENDPOINT") and env.get("AZURE_OPENAI_API_KEY"):
        out["azure"] = ProviderProfile(
            name="azure",
            kind="azure_openai",
            azure_endpoint=env["AZURE_OPENAI_ENDPOINT"],
            api_version=env.get("AZURE_OPENAI_API_VERSION") or DEFAULT_AZURE_API_VERSION,
            api_key_env="AZURE_OPENAI_API_KEY",
        )
    return out


def load_profiles(
    *,
    file: str | Path | None = None,
    specs: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
    resolve: bool = True,
) -> dict[str, ProviderProfile]:
    """Collect profiles from the environment, a YAML file and CLI specs, then resolve keys.

    Args:
        resolve: read every profile's key now (:func:`resolve_secrets`); False leaves them to
            the caller, which can then tell which profile lacks its key
            (``skillopt models check``).

    Raises:
        ConfigError: a malformed profile (unknown kind or option, bad value) or (``resolve``) a
            credential that is configured but missing; the message names what to set.
    """
    env = os.environ if environ is None else environ
    profiles = _env_profiles(env)
    if file:
        try:
            data = yaml.safe_load(Path(file).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{file}: cannot read the providers file: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("providers", {}), dict):
            raise ConfigError(f"{file}: expected a mapping with a 'providers' mapping")
        for name, raw in (data.get("providers") or {}).items():
            if not isinstance(raw, dict):
                raise ConfigError(f"{file}: provider {name!r} must be a mapping")
            profiles[str(name)] = _profile(str(name), raw)
    for spec in specs:
        p = parse_profile_spec(spec)
        profiles[p.name] = p
    if not resolve:
        return profiles
    return {name: resolve_secrets(p, env) for name, p in profiles.items()}


def _read_env(profile: ProviderProfile, var: str, env: Mapping[str, str], option: str) -> str:
    value = env.get(var, "")
    if not value:
        raise ConfigError(
            f"provider {profile.name!r}: environment variable {var} ({option}) is not set; "
            "export it on the host that makes the calls"
        )
    return value


def resolve_secrets(profile: ProviderProfile, environ: Mapping[str, str] | None = None) -> ProviderProfile:
    """The profile with ``api_key``/``ad_token`` read from their variable or file.

    Already resolved secrets are kept. Raises ConfigError naming the variable or file when one is
    missing or empty, or when the kind needs a credential and none is configured.
    """
    env = os.environ if environ is None else environ
    key, token = profile.api_key, profile.ad_token
    if not key and profile.api_key_file:
        try:
            key = Path(profile.api_key_file).read_text().strip()
        except OSError as exc:
            raise ConfigError(
                f"provider {profile.name!r}: cannot read api_key_file {profile.api_key_file}: {exc.strerror}"
            ) from exc
        if not key:
            raise ConfigError(f"provider {profile.name!r}: api_key_file {profile.api_key_file} is empty")
    elif not key and profile.api_key_env:
        key = _read_env(profile, profile.api_key_env, env, "api_key_env")
    if not token and profile.azure_ad_token_env:
        token = _read_env(profile, profile.azure_ad_token_env, env, "azure_ad_token_env")
    need = KINDS[profile.kind].key
    if not key and (need == "required" or (need == "unless_base_url" and not profile.base_url)):
        raise ConfigError(
            f"provider {profile.name!r}: kind {profile.kind} needs a key; set api_key_env (the name of "
            "an environment variable holding it) or api_key_file"
        )
    if key == profile.api_key and token == profile.ad_token:
        return profile
    return replace(profile, api_key=key, ad_token=token)


_AUTO_HINTS = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "azure": ("AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_KEY"),
}


def build_model(profile: ProviderProfile) -> ChatModel:
    """Instantiate the SDK client for a profile (no network traffic).

    A profile built in code whose key is not resolved yet (``api_key_env`` set, ``api_key``
    empty) is resolved from the environment first.

    Raises:
        ConfigError: an unknown kind, a missing credential or a missing optional package.
    """
    p = resolve_secrets(profile)
    kind = kind_of(p.kind, profile=p.name)
    kwargs = {arg: getattr(p, arg) for arg in kind.args}
    if kind.key == "by_auth":  # Azure: exactly the credential ``auth`` names
        from skillopt.models.azure_openai import entra_token_provider

        kwargs.update(
            api_key=p.api_key if p.auth == "api_key" else "",
            ad_token=p.ad_token if p.auth == "ad_token" else "",
            token_provider=entra_token_provider(p.entra_scope, profile=p.name)
            if p.auth == "entra_id"
            else None,
        )
    return model_class(kind)(
        p.name,
        max_retries=p.max_retries,
        timeout_s=p.timeout_s,
        default_extra=p.extra,
        key_hint=_key_hint(p),
        **kwargs,
    )


def _key_hint(p: ProviderProfile) -> str:
    if p.api_key_file:
        return f"the key file {p.api_key_file} (api_key_file of provider {p.name!r})"
    if p.api_key_env:
        return f"the environment variable {p.api_key_env} (api_key_env of provider {p.name!r})"
    if p.azure_ad_token_env:
        return f"the Entra token in {p.azure_ad_token_env} (azure_ad_token_env of provider {p.name!r})"
    if p.auth == "entra_id":
        return "the Entra ID login of this host (azure-identity DefaultAzureCredential)"
    return f"the credential of provider {p.name!r} (set api_key_env or api_key_file)"


def validate_profiles(
    profiles: Mapping[str, ProviderProfile],
    required: Iterable[str] = (),
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, ChatModel]:
    """Check at startup that every required profile exists and builds; return the models.

    Building creates the SDK clients (no network traffic), so a missing optional package
    (``azure-identity``) or credential is reported now rather than at the first call.

    Args:
        profiles: from :func:`load_profiles`.
        required: profile names the run uses (e.g. the optimizer's and the target's); empty =
            every profile.
        environ: for the hints on the automatic profiles (default ``os.environ``).

    Raises:
        ConfigError: naming the missing profile and exactly what to set.
    """
    env = os.environ if environ is None else environ
    names = list(dict.fromkeys(required)) or list(profiles)
    for name in names:
        if name in profiles:
            continue
        known = ", ".join(sorted(profiles)) or "none"
        if name in _AUTO_HINTS:
            unset = [v for v in _AUTO_HINTS[name] if not env.get(v)]
            what = f"set {' and '.join(unset or _AUTO_HINTS[name])} for the automatic profile {name!r}, or "
        else:
            what = ""
        raise ConfigError(
            f"no provider profile {name!r} (configured: {known}); {what}define it under 'providers:' "
            "in the providers file (model.providers_file, or --providers for the sandbox service)"
        )
    return {name: build_model(profiles[name]) for name in names}
