"""How every command reaches the sandbox fleet: one set of flags, keys and variables.

``train``, ``eval``, ``fleet status``, ``sandbox ...``, ``score`` and the Inspect provider all
take the same settings, each from the first of these that gives it:

=================  ==========================  ==========================  ============================
setting            flag                        config key (``sandbox.``)   environment variable
=================  ==========================  ==========================  ============================
hosts              ``--endpoints A,B``         ``endpoints``               ``SKILLOPT_ENDPOINTS=A,B``
token (a file)     ``--token-file F``          ``token_file``              ``SKILLOPT_TOKEN_FILE=F``
token (the value)  (none: never on a command)  (none: never in a config)   ``SKILLOPT_SANDBOX_TOKEN=T``
CA of the hosts    ``--tls-ca F``              ``tls_ca_file``             ``SKILLOPT_TLS_CA=F``
client cert (mTLS) ``--tls-cert F``            ``tls_cert_file``           ``SKILLOPT_TLS_CERT=F``
client key (mTLS)  ``--tls-key F``             ``tls_key_file``            ``SKILLOPT_TLS_KEY=F``
=================  ==========================  ==========================  ============================

``--endpoints`` takes a comma list and may repeat; an endpoint is ``HOST:PORT``,
``dns:///NAME:PORT`` (every address the name resolves to) or ``unix:/PATH``. A token file
names a file; ``SKILLOPT_SANDBOX_TOKEN`` holds the token itself and is used only when no token
file is given anywhere. TLS is on when a CA or a client certificate is given (no CA: the
system's roots verify the hosts). Every file is read when the settings are resolved, so a
wrong path fails at once, naming the flag, key or variable it came from.

Usage::

    add_fleet_arguments(parser)                       # in a command's register()
    access = access_from_args(args, config=cfg.sandbox.to_dict())
    channels = access.channels()
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt.errors import ConfigError

if TYPE_CHECKING:  # grpc is imported only when a channel is made: `--help` stays fast
    from controller.client.sandbox_client import ChannelConfig
    from skillopt.config import Config

__all__ = [
    "ENV_ENDPOINTS",
    "ENV_TLS_CA",
    "ENV_TLS_CERT",
    "ENV_TLS_KEY",
    "ENV_TOKEN",
    "ENV_TOKEN_FILE",
    "FleetAccess",
    "access_from_args",
    "add_fleet_arguments",
    "config_with_access",
    "read_token",
    "resolve_access",
    "split_endpoints",
]

ENV_ENDPOINTS = "SKILLOPT_ENDPOINTS"
ENV_TOKEN_FILE = "SKILLOPT_TOKEN_FILE"
ENV_TOKEN = "SKILLOPT_SANDBOX_TOKEN"
ENV_TLS_CA = "SKILLOPT_TLS_CA"
ENV_TLS_CERT = "SKILLOPT_TLS_CERT"
ENV_TLS_KEY = "SKILLOPT_TLS_KEY"

#: setting → (flag, config key, environment variable).
_SOURCES: dict[str, tuple[str, str, str]] = {
    "endpoints": ("--endpoints", "sandbox.endpoints", ENV_ENDPOINTS),
    "token_file": ("--token-file", "sandbox.token_file", ENV_TOKEN_FILE),
    "tls_ca_file": ("--tls-ca", "sandbox.tls_ca_file", ENV_TLS_CA),
    "tls_cert_file": ("--tls-cert", "sandbox.tls_cert_file", ENV_TLS_CERT),
    "tls_key_file": ("--tls-key", "sandbox.tls_key_file", ENV_TLS_KEY),
}
#: The argparse ``dest`` of each setting's flag.
_DESTS = {
    "endpoints": "endpoints",
    "token_file": "token_file",
    "tls_ca_file": "tls_ca",
    "tls_cert_file": "tls_cert",
    "tls_key_file": "tls_key",
}
_ENDPOINT = re.compile(r"^(?:dns:///)?(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):([0-9]{1,5})$")
_NO_ENDPOINT = (
    "no sandbox endpoint: give --endpoints HOST:PORT[,HOST:PORT...], or set "
    f"{ENV_ENDPOINTS}=HOST:PORT[,...] (or sandbox.endpoints in a config)"
)


def add_fleet_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    endpoints_default: str = "",
    config_keys: bool = False,
) -> None:
    """Add ``--endpoints``, ``--token-file``, ``--tls-ca``, ``--tls-cert`` and ``--tls-key``.

    Args:
        endpoints_default: what no endpoint means for this command (said in the help), e.g.
            "an embedded local sandbox"; "" = the command needs one.
        config_keys: the command takes a config, whose ``sandbox.*`` keys come second (said
            in the help).
    """
    when_none = f"; none anywhere: {endpoints_default}" if endpoints_default else ""

    def key(name: str) -> str:
        return f"sandbox.{name}, " if config_keys else ""

    parser.add_argument(
        "--endpoints",
        action="append",
        default=None,
        metavar="HOST:PORT[,...]",
        help="sandbox hosts: HOST:PORT, dns:///NAME:PORT or unix:/PATH, comma-separated, repeatable "
        f"(default: {key('endpoints')}${ENV_ENDPOINTS}{when_none})",
    )
    parser.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help=f"file holding the hosts' bearer token (default: {key('token_file')}${ENV_TOKEN_FILE}; "
        f"else the token itself from ${ENV_TOKEN})",
    )
    parser.add_argument(
        "--tls-ca",
        default=None,
        metavar="FILE",
        help=f"PEM CA that signed the hosts' certificates; turns TLS on (default: {key('tls_ca_file')}"
        f"${ENV_TLS_CA})",
    )
    parser.add_argument(
        "--tls-cert",
        default=None,
        metavar="FILE",
        help=f"PEM client certificate for mutual TLS, with --tls-key (default: {key('tls_cert_file')}"
        f"${ENV_TLS_CERT})",
    )
    parser.add_argument(
        "--tls-key",
        default=None,
        metavar="FILE",
        help=f"PEM private key of --tls-cert (default: {key('tls_key_file')}${ENV_TLS_KEY})",
    )


def split_endpoints(values: str | Sequence[str] | None) -> list[str]:
    """``["a:1,b:2", "c:3"]`` → ``["a:1", "b:2", "c:3"]`` (blanks and repeats dropped)."""
    if values is None:
        return []
    items = [values] if isinstance(values, str) else list(values)
    out: list[str] = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if part and part not in out:
                out.append(part)
    return out


@dataclass(frozen=True, kw_only=True)
class FleetAccess:
    """Resolved fleet settings: where the hosts are and how to authenticate to them."""

    endpoints: tuple[str, ...] = ()
    #: The bearer token (``None``: send none).
    token: str | None = None
    #: The file the token came from ("" when none, or when it came from ``$SKILLOPT_SANDBOX_TOKEN``).
    token_file: str = ""
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: setting → where its value came from (``--endpoints``, ``sandbox.endpoints``, ``$SKILLOPT_ENDPOINTS``).
    origin: Mapping[str, str] = field(default_factory=dict)

    @property
    def tls(self) -> bool:
        return bool(self.tls_ca_file or self.tls_cert_file)

    def channel(self, address: str) -> ChannelConfig:
        from controller.client.sandbox_client import ChannelConfig

        return ChannelConfig(
            address=address,
            token=self.token,
            tls_ca_file=self.tls_ca_file,
            tls_cert_file=self.tls_cert_file,
            tls_key_file=self.tls_key_file,
        )

    def channels(self) -> list[ChannelConfig]:
        """One channel per endpoint (``dns:///`` names not expanded yet)."""
        return [self.channel(e) for e in self.endpoints]

    def sandbox_keys(self) -> dict[str, Any]:
        """The ``sandbox.*`` config keys for these settings (never the token's value)."""
        return {
            "endpoints": list(self.endpoints),
            "token_file": self.token_file,
            "tls_ca_file": self.tls_ca_file,
            "tls_cert_file": self.tls_cert_file,
            "tls_key_file": self.tls_key_file,
        }


def access_from_args(
    args: argparse.Namespace,
    *,
    config: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    require_endpoints: bool = True,
) -> FleetAccess:
    """:func:`resolve_access` with the flags :func:`add_fleet_arguments` added to ``args``."""
    given = {setting: getattr(args, dest, None) for setting, dest in _DESTS.items()}
    return resolve_access(given, config=config, environ=environ, require_endpoints=require_endpoints)


def resolve_access(
    given: Mapping[str, Any] | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    token: str | None = None,
    require_endpoints: bool = True,
    labels: Mapping[str, str] | None = None,
    config_prefix: str = "sandbox.",
) -> FleetAccess:
    """Each setting from the first source that gives it: ``given`` (the flags), ``config``
    (the ``sandbox`` section's keys, or the Inspect provider's YAML: the same names), then the
    environment. Files are read now.

    Args:
        given: setting name (``endpoints``, ``token_file``, ``tls_ca_file``, ``tls_cert_file``,
            ``tls_key_file``) → value; ``None`` or "" = not given.
        token: the token itself (the Python API's ``token=``); beats every token file.
        require_endpoints: no endpoint anywhere is an error (else an empty ``endpoints``).
        labels: setting → how to name an explicit value in messages (default: its flag).
        config_prefix: names a ``config`` key in messages (``sandbox.`` + the key).

    Raises:
        ConfigError: no endpoint (when required), a malformed endpoint, a client certificate
            without its key (or the reverse), or a file that cannot be read; the message names
            where the bad value came from.
    """
    env = os.environ if environ is None else environ
    given, config = dict(given or {}), dict(config or {})
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for setting, (flag, _, var) in _SOURCES.items():
        explicit, key = (labels or {}).get(setting, flag), config_prefix + setting
        candidates: list[tuple[str, Any]]
        if setting == "endpoints":
            candidates = [
                (explicit, split_endpoints(given.get(setting))),
                (key, split_endpoints(config.get(setting))),
                (f"${var}", split_endpoints(env.get(var))),
            ]
        else:
            candidates = [
                (explicit, str(given.get(setting) or "")),
                (key, str(config.get(setting) or "")),
                (f"${var}", env.get(var, "")),
            ]
        for source, value in candidates:
            if value:
                values[setting], origin[setting] = value, source
                break
    endpoints = tuple(values.get("endpoints", ()))
    for endpoint in endpoints:
        _check_endpoint(endpoint, origin["endpoints"])
    if require_endpoints and not endpoints:
        raise ConfigError(_NO_ENDPOINT)
    tls = {k: os.path.expanduser(values.get(k, "")) for k in ("tls_ca_file", "tls_cert_file", "tls_key_file")}
    if bool(tls["tls_cert_file"]) != bool(tls["tls_key_file"]):
        have, missing = (
            ("tls_cert_file", "tls_key_file") if tls["tls_cert_file"] else ("tls_key_file", "tls_cert_file")
        )
        raise ConfigError(
            f"{origin[have]} needs {_SOURCES[missing][0]} too (mutual TLS takes the client certificate "
            f"and its private key; also {_SOURCES[missing][1]} or ${_SOURCES[missing][2]})"
        )
    for setting, path in tls.items():
        if path:
            _check_pem(path, origin[setting])
    token_file = os.path.expanduser(values.get("token_file", ""))
    if token is None and token_file:
        token = read_token(token_file, origin["token_file"])
    elif token is None and env.get(ENV_TOKEN):
        token, origin["token"] = env[ENV_TOKEN].strip(), f"${ENV_TOKEN}"
    return FleetAccess(endpoints=endpoints, token=token or None, token_file=token_file, origin=origin, **tls)


def read_token(path: str, source: str) -> str:
    """The token in ``path``: the first word of its first non-empty line (a host's token file
    may list tenants, ``TOKEN max_sessions=N`` per line).

    Raises:
        ConfigError: unreadable or empty, naming ``source``.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or exc
        raise ConfigError(f"token file {path} (from {source}): cannot read it ({why})") from exc
    for line in text.splitlines():
        if line.strip():
            return line.split()[0]
    raise ConfigError(f"token file {path} (from {source}) is empty: write the hosts' token into it")


def _check_endpoint(endpoint: str, source: str) -> None:
    if endpoint.startswith("unix:") and len(endpoint) > len("unix:"):
        return
    match = _ENDPOINT.match(endpoint)
    if not match or not 1 <= int(match.group(1)) <= 65535:
        raise ConfigError(
            f"{source}: {endpoint!r} is not an endpoint; expected HOST:PORT (port 1-65535), "
            "dns:///NAME:PORT or unix:/PATH, several separated by commas"
        )


def _check_pem(path: str, source: str) -> None:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{source} {path}: cannot read it ({exc.strerror or exc})") from exc
    if b"-----BEGIN" not in data:
        raise ConfigError(f"{source} {path}: not a PEM file")


def config_with_access(
    cfg: Config, args: argparse.Namespace, *, environ: Mapping[str, str] | None = None
) -> Config:
    """``cfg`` with the fleet settings of the flags (then its own ``sandbox.*`` keys, then the
    environment) written into its ``sandbox`` section, so the run's ``config.json`` records the
    fleet it used (never the token's value). No endpoint anywhere: ``cfg`` as it is (the
    embedded local sandbox).

    Raises:
        ConfigError: as :func:`resolve_access`; or a token or TLS flag without any endpoint
            (it would be ignored: the embedded sandbox needs none).
    """
    from skillopt.config import config_from_dict

    access = access_from_args(args, config=cfg.sandbox.to_dict(), environ=environ, require_endpoints=False)
    if not access.endpoints:
        flags = [_SOURCES[s][0] for s, dest in _DESTS.items() if getattr(args, dest, None)]
        if flags:
            raise ConfigError(
                f"{', '.join(flags)} given without a sandbox endpoint; add --endpoints HOST:PORT (or set "
                f"${ENV_ENDPOINTS}), or drop them to use the embedded local sandbox"
            )
        return cfg
    data = cfg.to_dict(redacted=False)
    data.pop("derived", None)
    data["sandbox"] = {**data["sandbox"], **access.sandbox_keys()}
    return config_from_dict(data, source="the fleet settings (--endpoints, --token-file, --tls-*)")
