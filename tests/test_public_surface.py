"""The public surface of each package is what ``__all__`` says, nothing drifts silently (as in
httpx's ``test_exported_members``): every exported name resolves, and the lists are pinned."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

SURFACE = {
    "skillopt": [
        "Callback",
        "Config",
        "ConfigError",
        "EnvData",
        "Environment",
        "EpochRecord",
        "FitResult",
        "Grading",
        "InfraError",
        "InfraErrorKind",
        "InfraFailure",
        "Limits",
        "ModelError",
        "ModelSpec",
        "RolloutRequest",
        "RolloutResult",
        "RunControl",
        "SkillError",
        "SkillOptError",
        "SkillVersion",
        "StepRecord",
        "SystemicFailure",
        "Task",
        "TaskItem",
        "Trainer",
        "Usage",
        "__version__",
        "available_envs",
        "config_from_dict",
        "get_env",
        "load_config",
        "load_env_data",
        "with_overrides",
    ],
    "sandbox": [
        "ContainerSpec",
        "DockerRuntime",
        "RolloutSandbox",
        "RunningServer",
        "RuntimeConfig",
        "SandboxRuntime",
        "ServerConfig",
        "ServiceConfig",
        "serve",
    ],
    "controller": ["ChannelConfig", "FleetExecutor", "HealthWatch", "SandboxClient", "map_rpc_error"],
}


@pytest.mark.parametrize("package", list(SURFACE))
def test_the_exported_names_are_pinned_and_resolve(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(SURFACE[package])
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module)
    with pytest.raises(AttributeError, match="has no attribute"):
        module.NotExported  # noqa: B018


def test_importing_skillopt_imports_none_of_its_surface():
    code = "import sys, skillopt; print(sorted(m for m in sys.modules if m.startswith('skillopt.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['skillopt._lazy']"


def test_the_sandbox_client_speaks_domain_types_only():
    import inspect

    from controller import SandboxClient
    from skillopt.types import HostDescription

    assert inspect.signature(SandboxClient.describe).return_annotation in (HostDescription, "HostDescription")
