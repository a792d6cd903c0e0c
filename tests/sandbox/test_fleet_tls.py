"""Every command reaches a host that requires mutual TLS (as ``docker/k8s`` deploys it) the same
way, from flags, from the environment or from config keys; and a command that reaches no host
exits non-zero naming each endpoint and why. One real host in process, real certificates, the
real CLI (``controller.cli.main``) in process."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli import main
from controller.client.inspect_provider import SkillOptSandboxConfig
from controller.client.sessions import SandboxSession
from skillopt.logs import configure_logging
from skillopt.testing.shared_data import shared_datasets
from tests.sandbox.conftest import Service, start_service
from tests.tls_certs import TlsFiles, make_tls_files


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def host(docker_client, scripted, tls) -> Iterator[Service]:
    yield from start_service(
        scripted,
        capacity=1,
        pool_size=1,
        server_kw={
            "tls_cert_file": str(tls.server_cert),
            "tls_key_file": str(tls.server_key),
            "tls_client_ca_file": str(tls.ca),  # clients must present a certificate it signed
        },
    )


@pytest.fixture
def token_file(host, tmp_path) -> Path:
    path = tmp_path / "token"
    path.write_text(host.token + "\n")
    return path


@pytest.fixture
def clean_env(monkeypatch):
    """No fleet settings from the test's own environment; the in-process host logs to stderr,
    so stdout holds only what the command prints."""
    configure_logging(json=True, level="warning")
    for var in ("ENDPOINTS", "TOKEN_FILE", "SANDBOX_TOKEN", "TLS_CA", "TLS_CERT", "TLS_KEY"):
        monkeypatch.delenv(f"SKILLOPT_{var}", raising=False)
    return monkeypatch


def flags(host, tls, token_file, **drop: bool) -> list[str]:
    given = {
        "--endpoints": host.running.address,
        "--token-file": str(token_file),
        "--tls-ca": str(tls.ca),
        "--tls-cert": str(tls.client_cert),
        "--tls-key": str(tls.client_key),
    }
    return [x for k, v in given.items() if not drop.get(k[2:].replace("-", "_")) for x in (k, v)]


@pytest.mark.parametrize("source", ["environment", "flags"])
def test_sandbox_exec_runs_a_command_on_a_mutual_tls_host(host, tls, token_file, clean_env, capfd, source):
    argv = ["sandbox", "exec"]
    if source == "environment":  # the README's session example, with the deployment's mTLS
        for var, value in {
            "ENDPOINTS": host.running.address,
            "TOKEN_FILE": str(token_file),
            "TLS_CA": str(tls.ca),
            "TLS_CERT": str(tls.client_cert),
            "TLS_KEY": str(tls.client_key),
        }.items():
            clean_env.setenv(f"SKILLOPT_{var}", value)
    else:
        argv += flags(host, tls, token_file)
    assert main([*argv, "--", "python3", "-c", "print(6 * 7)"]) == 0
    assert capfd.readouterr().out == "42\n"
    assert host.running.servicer.sessions.count() == 0


@pytest.mark.parametrize(
    ("drop", "other_ca", "why"),
    [
        ({"tls_cert": True, "tls_key": True}, False, "may require a client certificate"),
        ({"tls_ca": True, "tls_cert": True, "tls_key": True}, False, "it serves TLS (give --tls-ca)"),
        ({}, True, "not signed by the CA given"),
    ],
    ids=["no-client-certificate", "plaintext", "wrong-ca"],
)
def test_a_host_refusing_the_connection_is_named_with_why(
    host, tls, token_file, clean_env, capfd, drop, other_ca, why
):
    argv = flags(host, tls, token_file, **drop)
    if other_ca:
        argv[argv.index("--tls-ca") + 1] = str(tls.other_ca)
    assert main(["sandbox", "exec", *argv, "--", "true"]) != 0
    err = capfd.readouterr().err
    assert host.running.address in err and why in err


def test_ls_takes_a_comma_list_and_fails_when_a_host_could_not_be_asked(
    host, tls, token_file, clean_env, capfd
):
    argv = flags(host, tls, token_file)
    argv[argv.index("--endpoints") + 1] = f"127.0.0.1:1,{host.running.address}"
    assert main(["sandbox", "ls", "--json", *argv]) == 1
    out, err = capfd.readouterr()
    assert json.loads(out) == []  # the host that answered has no session
    assert "127.0.0.1:1: connection refused" in err and "1 of 2 hosts could not be asked" in err
    argv[argv.index("--endpoints") + 1] = "127.0.0.1:1"
    assert main(["sandbox", "ls", "--json", *argv]) == 1
    assert "no host could be asked" in capfd.readouterr().err


def test_fleet_status_takes_mutual_tls_from_config_keys(host, tls, token_file, clean_env, capfd, tmp_path):
    config = tmp_path / "fleet.yaml"
    config.write_text(
        "env: {name: searchqa}\n"
        "sandbox:\n"
        f"  endpoints: ['{host.running.address}']\n"
        f"  token_file: {token_file}\n"
        f"  tls_ca_file: {tls.ca}\n"
        f"  tls_cert_file: {tls.client_cert}\n"
        f"  tls_key_file: {tls.client_key}\n"
    )
    assert main(["fleet", "status", "--config", str(config), "--json"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["ok"] and [h["host"] for h in report["hosts"]] == [host.host_id]
    (tmp_path / "wrong").write_text("not-the-token\n")
    assert main(["fleet", "status", "--config", str(config), "--token-file", str(tmp_path / "wrong")]) == 1
    assert "the host refused the token" in capfd.readouterr().out


def test_eval_that_reaches_no_host_exits_non_zero_naming_each(
    host, tls, token_file, clean_env, capfd, tmp_path
):
    skill = tmp_path / "SKILL.md"
    skill.write_text("Answer briefly.\n")
    argv = flags(host, tls, token_file, tls_cert=True, tls_key=True)
    argv[argv.index("--endpoints") + 1] = f"127.0.0.1:1,{host.running.address}"
    run = [
        "eval",
        "--config",
        "searchqa_demo",
        "--skill",
        str(skill),
        "--simulate",
        "on",
        "--out",
        str(tmp_path),
    ]
    code = main([*run, *argv])
    err = capfd.readouterr().err
    assert code == 1, err
    assert "127.0.0.1:1: connection refused" in err
    assert f"{host.running.address}: the host closed the connection" in err


def test_score_grades_code_in_sessions_on_the_fleet(host, tls, token_file, clean_env, capfd, tmp_path):
    raw = json.loads((shared_datasets() / "humaneval" / "HumanEval.jsonl").read_text().splitlines()[2])
    (tmp_path / "item.json").write_text(json.dumps(raw))
    (tmp_path / "reply.txt").write_text(f"```python\n{raw['prompt'] + raw['canonical_solution']}\n```\n")
    argv = ["score", "--env", "humaneval", "--item", str(tmp_path / "item.json"), "--response"]
    assert main([*argv, str(tmp_path / "reply.txt"), *flags(host, tls, token_file)]) == 0
    out = json.loads(capfd.readouterr().out)
    assert out["hard"] == 1.0 and out["n_tests"] >= 1
    assert host.running.servicer.sessions.count() == 0
    assert main([*argv, str(tmp_path / "reply.txt"), "--endpoints", "127.0.0.1:1"]) == 2  # not local Docker
    assert "127.0.0.1:1: connection refused" in capfd.readouterr().err


def test_the_inspect_provider_config_takes_mutual_tls(host, tls, token_file, clean_env):
    config = SkillOptSandboxConfig(
        endpoints=host.running.address,
        token_file=str(token_file),
        tls_ca_file=str(tls.ca),
        tls_cert_file=str(tls.client_cert),
        tls_key_file=str(tls.client_key),
    )
    with SandboxSession.create(config.where()) as box:
        assert box.exec(["sh", "-c", "echo ok"], timeout=30).stdout == b"ok\n"
