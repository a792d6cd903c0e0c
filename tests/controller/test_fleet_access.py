"""How every command resolves the fleet (``controller.fleet.access``): one flag set, one order
(flag, then ``sandbox.*`` key, then environment variable), every file checked up front; and the
flag spellings every command shares (old ones still accepted, with a note)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import build_parser
from controller.client.sandbox_client import connect_hint
from controller.fleet.access import config_with_access, resolve_access
from skillopt.config import load_config
from skillopt.errors import ConfigError

#: Every command that reaches the fleet, as typed before its fleet flags.
COMMANDS = [
    ["train", "--config", "searchqa_demo"],
    ["eval", "--config", "searchqa_demo", "--skill", "s.md"],
    ["fleet", "status"],
    ["sandbox", "exec", "x.py"],
    ["sandbox", "create"],
    ["sandbox", "cp", "a", "b"],
    ["sandbox", "shell"],
    ["sandbox", "ls"],
    ["sandbox", "rm", "id"],
    ["score", "--env", "humaneval"],
    ["models", "check", "--config", "searchqa_demo"],
]


@pytest.fixture
def pem(tmp_path: Path) -> Path:
    path = tmp_path / "x.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
    return path


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_every_command_takes_the_same_fleet_flags(command):
    args = build_parser().parse_args(
        [
            *command,
            "--endpoints",
            "a:1,b:2",
            "--endpoints",
            "c:3",
            "--token-file",
            "T",
            "--tls-ca",
            "CA",
            "--tls-cert",
            "C",
            "--tls-key",
            "K",
        ]
    )
    assert (args.endpoints, args.token_file, args.tls_ca, args.tls_cert, args.tls_key) == (
        ["a:1,b:2", "c:3"],
        "T",
        "CA",
        "C",
        "K",
    )


@pytest.mark.parametrize(
    ("given", "config", "environ", "expected"),
    [
        ({"endpoints": ["a:1,b:2", "c:3", "a:1"]}, {"endpoints": ["x:9"]}, {}, ("a:1", "b:2", "c:3")),
        ({}, {"endpoints": ["x:9"]}, {"SKILLOPT_ENDPOINTS": "e:5"}, ("x:9",)),
        ({}, {}, {"SKILLOPT_ENDPOINTS": " e:5, dns:///svc:7 ,"}, ("e:5", "dns:///svc:7")),
    ],
    ids=["flags-beat-config", "config-beats-env", "env-comma-list"],
)
def test_endpoints_come_from_the_first_source_that_gives_them(given, config, environ, expected):
    assert resolve_access(given, config=config, environ=environ).endpoints == expected


def test_each_setting_is_resolved_on_its_own(tmp_path, pem):
    (tmp_path / "flag-token").write_text("from-flag\n")
    (tmp_path / "env-token").write_text("from-env-file other words\nsecond\n")
    env = {
        "SKILLOPT_ENDPOINTS": "e:5",
        "SKILLOPT_TOKEN_FILE": str(tmp_path / "env-token"),
        "SKILLOPT_SANDBOX_TOKEN": "from-env-value",
        "SKILLOPT_TLS_CA": str(pem),
        "SKILLOPT_TLS_CERT": str(pem),
        "SKILLOPT_TLS_KEY": str(pem),
    }
    from_env = resolve_access({}, environ=env)
    assert (from_env.endpoints, from_env.token, from_env.tls_ca_file, from_env.tls) == (
        ("e:5",),
        "from-env-file",  # a token file beats the token variable; its first word is the token
        str(pem),
        True,
    )
    mixed = resolve_access(
        {"token_file": str(tmp_path / "flag-token")}, config={"endpoints": ["k:1"]}, environ=env
    )
    assert (mixed.endpoints, mixed.token, mixed.tls_cert_file) == (("k:1",), "from-flag", str(pem))
    assert mixed.origin == {
        "endpoints": "sandbox.endpoints",
        "token_file": "--token-file",
        "tls_ca_file": "$SKILLOPT_TLS_CA",
        "tls_cert_file": "$SKILLOPT_TLS_CERT",
        "tls_key_file": "$SKILLOPT_TLS_KEY",
    }
    value_only = resolve_access({"endpoints": "a:1"}, environ={"SKILLOPT_SANDBOX_TOKEN": " tok "})
    assert (value_only.token, value_only.token_file, value_only.tls) == ("tok", "", False)


@pytest.mark.parametrize(
    ("given", "environ", "message"),
    [
        ({}, {}, "no sandbox endpoint: give --endpoints HOST:PORT"),
        ({"endpoints": ["a:1,nonsense"]}, {}, "--endpoints: 'nonsense' is not an endpoint"),
        ({}, {"SKILLOPT_ENDPOINTS": "a:99999"}, "$SKILLOPT_ENDPOINTS: 'a:99999' is not an endpoint"),
        ({"endpoints": "a:1", "tls_cert_file": "PEM"}, {}, "--tls-cert needs --tls-key too"),
        ({"endpoints": "a:1"}, {"SKILLOPT_TLS_KEY": "PEM"}, "$SKILLOPT_TLS_KEY needs --tls-cert too"),
        (
            {"endpoints": "a:1", "tls_ca_file": "/no/such/ca.pem"},
            {},
            "--tls-ca /no/such/ca.pem: cannot read it",
        ),
        ({"endpoints": "a:1", "tls_ca_file": "TOKEN"}, {}, "not a PEM file"),
        (
            {"endpoints": "a:1"},
            {"SKILLOPT_TOKEN_FILE": "/no/such/token"},
            "(from $SKILLOPT_TOKEN_FILE): cannot read",
        ),
        ({"endpoints": "a:1", "token_file": "EMPTY"}, {}, "(from --token-file) is empty"),
    ],
)
def test_a_bad_setting_is_refused_naming_where_it_came_from(tmp_path, pem, given, environ, message):
    (tmp_path / "empty").write_text("\n\n")
    (tmp_path / "token").write_text("abc\n")
    files = {"PEM": str(pem), "EMPTY": str(tmp_path / "empty"), "TOKEN": str(tmp_path / "token")}
    given = {k: files.get(v, v) if isinstance(v, str) else v for k, v in given.items()}
    environ = {k: files.get(v, v) for k, v in environ.items()}
    with pytest.raises(ConfigError) as err:
        resolve_access(given, environ=environ)
    assert message in err.value.message


def test_a_run_config_records_the_fleet_it_reaches_and_never_the_token(tmp_path, pem, monkeypatch):
    monkeypatch.setenv("SKILLOPT_SANDBOX_TOKEN", "secret-token-value")
    monkeypatch.setenv("SKILLOPT_ENDPOINTS", "e:5,f:6")
    monkeypatch.setenv("SKILLOPT_TLS_CA", str(pem))
    args = build_parser().parse_args(
        ["train", "--config", "searchqa_demo", "--tls-cert", str(pem), "--tls-key", str(pem)]
    )
    cfg = config_with_access(load_config("searchqa_demo"), args)
    assert (
        cfg.sandbox.endpoints,
        cfg.sandbox.tls_ca_file,
        cfg.sandbox.tls_cert_file,
        cfg.sandbox.token_file,
    ) == (
        ("e:5", "f:6"),
        str(pem),
        str(pem),
        "",
    )
    assert "secret-token-value" not in str(cfg.to_dict())
    monkeypatch.delenv("SKILLOPT_ENDPOINTS")
    embedded = config_with_access(load_config("searchqa_demo"), build_parser().parse_args(["train"]))
    assert embedded.sandbox.endpoints == ()  # no endpoint anywhere: the embedded sandbox
    with pytest.raises(ConfigError, match="--tls-cert, --tls-key given without a sandbox endpoint"):
        config_with_access(load_config("searchqa_demo"), args)


@pytest.mark.parametrize(
    ("argv", "dest", "value", "note"),
    [
        (
            ["sandbox", "exec", "x.py", "--memory", "512"],
            "memory_mb",
            512,
            "--memory is deprecated; use --memory-mb",
        ),
        (["sandbox", "exec", "x.py", "--out-dir", "D"], "out", "D", "--out-dir is deprecated; use --out"),
        (["sandbox", "exec", "x.py", "--memory-mb", "256", "--out", "E"], "memory_mb", 256, ""),
    ],
)
def test_old_flag_spellings_still_work_and_say_the_new_one(capsys, argv, dest, value, note):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    err = capsys.readouterr().err
    assert (note in err) if note else err == ""


@pytest.mark.parametrize(
    ("detail", "hint"),
    [
        ("failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to "
         "remote host: Connection refused", "connection refused"),
        ("failed to connect to all addresses; last error: UNKNOWN: Tls handshake failed (TSI_PROTOCOL_FAILURE): "
         "SSL_ERROR_SSL: error:100000f7:SSL routines:OPENSSL_internal:WRONG_VERSION_NUMBER", "speaks plaintext"),
        ("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:5: Socket closed",
         "client certificate"),
        ("the model gateway said: Connection refused", ""),  # not a failed connection of ours
    ],
)  # fmt: skip
def test_a_failed_connection_is_explained(detail, hint):
    assert (hint in connect_hint(detail)) if hint else connect_hint(detail) == ""
