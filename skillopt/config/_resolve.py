"""Resolving a built config: the look-ups that need the env registry or the filesystem.

A :class:`~skillopt.config.schema.Config` is pure data, checked on its own (types, declared
bounds and choices, the rules between fields), so it can be built anywhere: in a test, for
``skillopt config schema``, from a run directory's ``config.json``. :func:`resolve_config` is
the one step that asks the world, done once on a built config: the loader runs it last
(:func:`skillopt.config.load_config`, :func:`~skillopt.config.config_from_dict`,
:func:`~skillopt.config.with_overrides`), so every config the CLI and the WebUI get is
resolved, and a config built in Python goes through it before it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

from skillopt.config._fields import FieldError, show
from skillopt.config.schema import SECTIONS, Config, EnvConfig, ModelConfig, RunConfig, SandboxConfig

__all__ = ["resolve_config"]


def resolve_config(config: Config) -> Config:
    """``config`` with its look-ups done, as a new config (the given one is left as it is):

    * ``env.name`` is a registered env, ``env.agent`` one of its agents (``""`` becomes the
      env's default), ``env.options`` valid for it and stored with every default filled in;
    * the paths that are set (``env.skill_init``, ``env.data_root``, ``model.providers_file``,
      ``sandbox.token_file`` and the TLS files) exist, and the data root suits the env and the
      split mode;
    * those paths and ``run.out_root`` are absolute (against the current directory).

    Resolving a resolved config gives an equal one.

    Raises:
        ConfigError: a :class:`FieldError` naming the key (an unknown env or agent, a missing
            file, a data root that does not suit the env), or the env's message about a bad
            ``env.options`` value (naming ``env.options.<key>``).
    """
    resolved = {
        "model": _model(config.model),
        "env": _env(config.env),
        "sandbox": _sandbox(config.sandbox),
        "run": _run(config.run),
    }
    return Config(**{name: resolved.get(name, getattr(config, name)) for name in SECTIONS})


def _abs(path: str) -> Path:
    """``path`` made absolute against the current directory (``~`` expanded, ``..`` folded).

    Not ``Path.resolve()``: a symlinked data directory keeps the name the user gave it.
    """
    return Path(os.path.abspath(os.path.expanduser(path)))


def _existing(key: str, value: str, *, directory: bool | None = False, what: str = "") -> str:
    """``value`` as an absolute path that exists (``""`` stays ``""``); ``directory=None``:
    a file or a directory."""
    if not value:
        return value
    path = _abs(value)
    found = path.exists() if directory is None else path.is_dir() if directory else path.is_file()
    if not found:
        kind = "directory" if directory else "file"  # either: the `what` says a folder will do
        raise FieldError(
            key,
            f"{kind} not found: {path} (relative paths are resolved against the current "
            f"directory {Path.cwd()}){what}",
        )
    return str(path)


def _env(env: EnvConfig) -> EnvConfig:
    from skillopt.envs.registry import available_envs, find_spec  # specs are cheap to import

    known = ", ".join(available_envs())
    if not env.name.strip():
        raise FieldError(
            "env.name",
            f"is required: the benchmark to train on (known: {known}), e.g. --set env.name=spreadsheetbench",
        )
    spec = find_spec(env.name)
    if spec is None:
        raise FieldError("env.name", f"unknown env {show(env.name, 'name')}; known: {known}")
    if env.agent and env.agent not in spec.agent_names:
        raise FieldError(
            "env.agent",
            f"unknown agent {show(env.agent, 'agent')} for env {env.name}; allowed: {', '.join(spec.agent_names)}",
        )
    options = spec.parse_options(env.options).model_dump(mode="json")
    skill_init = _existing(
        "env.skill_init",
        env.skill_init,
        directory=None,
        what='; a SKILL.md file or an Agent Skills package folder, "" uses the env\'s shipped initial skill',
    )
    if skill_init:
        _check_skill(skill_init, env)
    data_root = _existing(
        "env.data_root", env.data_root, directory=True, what='; "" uses the env\'s vendored sample'
    )
    if data_root and spec.data_root_problem is not None:
        problem = spec.data_root_problem(Path(data_root), env.split_mode)
        if problem:
            raise FieldError("env.data_root", problem)
    return env.replace(
        agent=env.agent or spec.default_agent, options=options, skill_init=skill_init, data_root=data_root
    )


def _check_skill(path: str, env: EnvConfig) -> None:
    """The initial skill is loaded and checked once here, so a bad package is refused before
    anything runs, with every problem (file and rule) in the message."""
    from skillopt.errors import SkillError
    from skillopt.skill.package import load_skill

    try:
        load_skill(Path(path), limits=env.skill_limits)
    except SkillError as exc:
        raise FieldError("env.skill_init", exc.message) from None


def _model(model: ModelConfig) -> ModelConfig:
    return model.replace(providers_file=_existing("model.providers_file", model.providers_file))


def _sandbox(sandbox: SandboxConfig) -> SandboxConfig:
    names = ("token_file", "tls_ca_file", "tls_cert_file", "tls_key_file")
    return sandbox.replace(**{name: _existing(f"sandbox.{name}", getattr(sandbox, name)) for name in names})


def _run(run: RunConfig) -> RunConfig:
    return run.replace(out_root=str(_abs(run.out_root)) if run.out_root else "")
