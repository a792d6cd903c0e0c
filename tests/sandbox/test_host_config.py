"""The host's configuration (``skillopt serve``): one model, a ``--config`` file with flags over
it, ``--print-config``, the messages for bad values, and the defaults every flag had before.

No container starts here: a refused value stops ``skillopt serve`` before it touches the engine,
and ``--print-config`` exits before it would.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from controller.cli import build_parser
from sandbox.server.host_config import HostConfig, config_yaml, flag_of, load_host_config, server_config
from skillopt.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SECRET = "host-token-4f9c2a7e1b"


def _serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "serve", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**{k: v for k, v in os.environ.items() if k != "SKILLOPT_SANDBOX_TOKEN"}, **(env or {})},
    )


def _flags(*argv: str) -> dict[str, object]:
    """What ``skillopt serve ARGV`` gives :func:`load_host_config`, from the real parser."""
    args = build_parser().parse_args(["serve", *argv])
    return {name: getattr(args, name) for name in HostConfig.model_fields}


#: Every flag ``skillopt serve`` had before its configuration was a model, with its default then.
#: (Defaults that depend on the machine, ``None`` here: the state dir, capacity, grader workers,
#: and the host id and pool size, which are worked out.)
OLD_FLAGS = {
    "--listen": "127.0.0.1:50051",
    "--token-file": "",
    "--insecure": False,
    "--tls-cert": "",
    "--tls-key": "",
    "--tls-client-ca": "",
    "--host-id": None,
    "--state-dir": None,
    "--capacity": None,
    "--pool-size": None,
    "--max-creations": 2,
    "--grader-workers": None,
    "--image": "skillopt-runtime:latest",
    "--runtime": "",
    "--require-runtime": False,
    "--memory-mb": 1024,
    "--cpus": 1.0,
    "--providers": "",
    "--provider": (),
    "--gateway-cache-dir": "",
    "--gateway-cache-mode": "off",
    "--exec-agents": "auto",
    "--simulate": "off",
    "--health-listen": "",
    "--http-listen": "",
    "--code-image": "",
    "--http-port-file": "",
    "--metrics-listen": "",
    "--max-sessions": 64,
    "--session-image": (),
    "--session-idle-ttl": 600.0,
    "--blob-cache-mb": 1024,
    "--skill-max-files": 200,
    "--skill-max-mb": 8.0,
    "--port-file": "",
    "--drain-grace": 30.0,
    "--exit-with-parent": False,
    "--log-format": "json",
    "--log-level": "info",
}


def test_every_flag_keeps_its_name_and_default_and_the_reuse_flags_are_new():
    assert len(OLD_FLAGS) == 39
    flags = {flag_of(key).name: key for key in HostConfig.model_fields}
    assert set(flags) == {*OLD_FLAGS, "--reuse-max-executions", "--reuse-max-age-s"}
    defaults = HostConfig()
    for flag, old in OLD_FLAGS.items():
        if old is not None:
            assert getattr(defaults, flags[flag]) == old, flag
    shown = _serve("--help")
    assert shown.returncode == 0, shown.stderr
    for flag in [*flags, "--config", "--print-config"]:
        assert re.search(rf"^  {flag}\b", shown.stdout, flags=re.M), flag


def test_the_defaults_are_the_runtime_s_own(tmp_path):
    from sandbox.runtime.spec import ContainerSpec, RuntimeConfig, default_pool_size
    from sandbox.server.serve import ServerConfig
    from sandbox.service.config import DEFAULT_LIMITS, SessionConfig
    from skillopt.skill.package import PackageLimits

    host = HostConfig(state_dir=str(tmp_path), host_id="h1")
    config = server_config(host, environ={})
    runtime = RuntimeConfig(host_id="h1", state_dir=str(tmp_path))
    for name in ("max_concurrent_creations", "reuse_max_executions", "reuse_max_age_s"):
        assert getattr(config.runtime, name) == getattr(runtime, name), name
    assert config.runtime.pool_size == default_pool_size(host.capacity, "")
    assert config.service.base_spec == ContainerSpec()
    assert config.service.default_limits == DEFAULT_LIMITS
    assert config.service.package_limits == PackageLimits()
    assert config.service.blob_cache_bytes == 1024 * 1024 * 1024
    assert config.sessions == SessionConfig()
    assert config.drain_grace_s == ServerConfig.__dataclass_fields__["drain_grace_s"].default
    assert HostConfig.model_fields["session_idle_ttl_s"].metadata[0].le == SessionConfig().max_idle_ttl_s
    assert config.token is None and config.tenants == ()


def test_a_file_and_flags_merge_the_flags_winning(tmp_path):
    (tmp_path / "host.yaml").write_text(
        "# a host of the fleet\n"
        "listen: 0.0.0.0:50051\n"
        "capacity: 8\n"
        "max_sessions: 5\n"
        "exec_agents: off\n"
        "session_images: [a:1, b:2]\n"
        "insecure: true\n"
        "log_level: WARN\n"
    )
    flags = _flags(
        "--capacity", "4", "--session-image", "c:3", "--no-insecure", "--reuse-max-executions", "0"
    )
    host, origins = load_host_config(tmp_path / "host.yaml", flags)
    assert (host.listen, host.capacity, host.max_sessions, host.exec_agents) == ("0.0.0.0:50051", 4, 5, "off")
    assert host.session_images == ("c:3",)  # a repeated flag's list replaces the file's
    assert host.insecure is False and host.log_level == "warning"
    assert host.reuse_max_executions == 0 and host.pool_size == 4  # worked out from the capacity
    assert origins["capacity"] == "--capacity" and origins["max_sessions"] == str(tmp_path / "host.yaml")
    assert origins["blob_cache_mb"] == "default" and origins["pool_size"] == "derived"
    runtime = server_config(host, environ={}).runtime
    assert (runtime.reuse_max_executions, runtime.reuse_max_age_s, runtime.pool_size) == (0, 600.0, 4)


def test_print_config_reads_back_to_the_same_config_and_never_shows_the_token(tmp_path):
    token_file = tmp_path / "tokens"
    token_file.write_text(f"{SECRET}-a max_sessions=2\n{SECRET}-b\n")
    (tmp_path / "host.yaml").write_text(f"capacity: 3\nhost_id: edge-1\ntoken_file: {token_file}\n")
    out = _serve(
        "--config", str(tmp_path / "host.yaml"), "--reuse-max-age-s", "120", "--simulate", "--print-config",
        env={"SKILLOPT_SANDBOX_TOKEN": SECRET},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert SECRET not in out.stdout + out.stderr
    assert "capacity: 3  # " in out.stdout and "reuse_max_age_s: 120.0  # --reuse-max-age-s" in out.stdout
    (tmp_path / "printed.yaml").write_text(out.stdout)
    printed, _ = load_host_config(tmp_path / "printed.yaml")
    expected, _ = load_host_config(tmp_path / "host.yaml", _flags("--reuse-max-age-s", "120", "--simulate"))
    assert printed == expected and printed.simulate == "on" and printed.host_id == "edge-1"
    # The token from the environment is said to be set, and never shown.
    out = _serve("--print-config", env={"SKILLOPT_SANDBOX_TOKEN": SECRET})
    assert out.returncode == 0 and SECRET not in out.stdout
    assert "# token: *** (from SKILLOPT_SANDBOX_TOKEN)" in out.stdout
    # ... and the token file's tokens reach the server's configuration, not the printout.
    config = server_config(printed, environ={"SKILLOPT_SANDBOX_TOKEN": "ignored: a token file is given"})
    assert config.tenants == ((f"{SECRET}-a", 2), (f"{SECRET}-b", 0)) and config.token is None


def test_print_config_masks_a_key_pasted_into_a_value():
    key = "sk-" + "a" * 40
    text = config_yaml(HostConfig(provider_specs=(f"x=openai,base_url=http://h/{key}",)), {})
    assert key not in text and "***" in text


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (["--grader-workers", "-1"], "--grader-workers must be 0 or more, got -1"),  # >= 0
        (["--capacity", "0"], "--capacity must be 1 or more, got 0"),  # >= 1
        (["--memory-mb", "16"], "--memory-mb must be at least 32 (MiB), got 16"),
        (["--cpus", "0"], "--cpus must be in (0, 256], got 0.0"),  # (low, high]
        (["--skill-max-mb", "0"], "--skill-max-mb must be positive, got 0.0"),  # > 0
        (["--session-idle-ttl", "90000"], "--session-idle-ttl must be in (0, 86400] seconds, got 90000.0"),
        (["--reuse-max-age-s", "30000"], "--reuse-max-age-s must be in (0, 21600] seconds, got 30000.0"),
        (
            ["--reuse-max-executions", "-2"],
            "--reuse-max-executions must be 0 or more, got -2 (0: never reused)",
        ),
        (["--drain-grace", "-1"], "--drain-grace must be >= 0 seconds, got -1.0"),
        (
            ["--log-level", "loud"],
            "--log-level unknown value 'loud'; allowed: debug, info, warning, error, critical",
        ),
        (["--host-id", "a/b"], "--host-id must be letters, digits, '.', '_' and '-' only, got 'a/b'"),
        (["--image", " "], "--image must not be empty"),
    ],
)
def test_a_bad_flag_is_refused_naming_the_flag(flags, expected):
    with pytest.raises(ConfigError) as info:
        load_host_config(None, _flags(*flags))
    assert info.value.message == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("grader_workers: -1", "grader_workers (from {f}): must be 0 or more, got -1"),
        ("cpus: 300", "cpus (from {f}): must be in (0, 256], got 300.0"),
        ("capacity: many", "capacity (from {f}): expected an integer, got string 'many'"),
        ("capacity: true", "capacity (from {f}): expected an integer, got boolean True"),
        ("exec_agents: maybe", "exec_agents (from {f}): unknown value 'maybe'; allowed: auto, on, off"),
        ("session_images: [a, 2]", "session_images[1] (from {f}): expected a string, got integer 2"),
        ("max_session: 3", "unknown key 'max_session' in {f}; did you mean 'max_sessions'?"),
        ("drain-grace: 3", "unknown key 'drain-grace' in {f}; did you mean 'drain_grace_s'?"),
        ("token: abc", "'token' in {f}: secrets are never read from the host's configuration file"),
        ("- listen", "{f}: expected a mapping of keys"),
        ("listen: [", "{f}: invalid YAML"),
    ],
)
def test_a_bad_key_or_value_in_the_file_is_refused_naming_the_key_and_the_file(tmp_path, text, expected):
    path = tmp_path / "host.yaml"
    path.write_text(text + "\n")
    with pytest.raises(ConfigError) as info:
        load_host_config(path, _flags())
    assert info.value.message.startswith(expected.format(f=path)), info.value.message
    assert "abc" not in info.value.message  # a secret's value is never echoed


def test_a_refused_value_stops_serve_before_anything_starts_with_one_line():
    out = _serve("--capacity", "-3", "--state-dir", "/nonexistent/never-created")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == ["skillopt serve: --capacity must be 1 or more, got -3"]
    out = _serve("--config", "/nonexistent/host.yaml", "--print-config")
    assert out.returncode == 2 and "/nonexistent/host.yaml: cannot read" in out.stderr


def test_a_token_file_that_cannot_be_read_is_named(tmp_path):
    host = HostConfig(token_file=str(tmp_path / "missing"), state_dir=str(tmp_path), host_id="h1")
    with pytest.raises(ConfigError, match=r"--token-file .*missing: cannot read it"):
        server_config(host, environ={})


def test_the_documentation_lists_every_key_and_its_flag():
    doc = (REPO / "docs" / "host.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| `(--[a-z-]+)` \|", doc, flags=re.M))
    assert rows == {key: flag_of(key).name for key in HostConfig.model_fields}
