"""Checks of the scripts in a skill package, before a candidate that changed them is evaluated.

A script the optimizer created or changed (a file under ``scripts/``) is checked in a sandbox,
where the package is mounted read-only at ``/skill``:

- ``python-compile``: Python (a ``.py`` file, or a ``python`` shebang) must compile. It is
  compiled in memory (``compile()``), never with ``py_compile``, which writes next to the file.
- ``bash-syntax``: shell (``.sh``/``.bash``, or an ``sh``/``bash`` shebang) must pass ``bash -n``.
- ``self-test`` / ``self-test-timeout``: a script whose text contains :data:`SELF_TEST_FLAG`
  ships a self-test, run as ``python3 /skill/<path> --self-test`` (``bash …`` for shell, the
  script itself or its shebang otherwise) in the sandbox's scratch directory; it must exit 0
  within the time limit. A script that fails its syntax check is not run.
- ``unchecked``: the check could not run (no sandbox); never a pass.

Other files under ``scripts/`` (no known language) pass unless their self-test fails. Files
outside ``scripts/`` are never checked. This module is pure: the commands run through the
``run`` callable it is given (a sandbox session's ``exec`` in ``controller.fleet.script_checks``).

Usage::

    checks = check_scripts(spec, ["scripts/helpers.py"], lambda argv, t: session.exec(argv, timeout=t))
    failed = [c for c in checks if not c.ok]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Protocol

from skillopt.types import SkillFile, SkillVersion

__all__ = [
    "DEFAULT_SELF_TEST_TIMEOUT_S",
    "RULES",
    "SELF_TEST_FLAG",
    "SKILL_MOUNT",
    "SYNTAX_CHECK_TIMEOUT_S",
    "CommandOutcome",
    "ScriptCheck",
    "check_scripts",
    "needs_check",
    "scripts_to_check",
    "unchecked",
]

#: A script whose text contains this ships a self-test: run with it, it must exit 0.
SELF_TEST_FLAG = "--self-test"
#: Longest a self-test may run (seconds) unless the caller says otherwise.
DEFAULT_SELF_TEST_TIMEOUT_S = 10.0
#: Longest a syntax check (compile, ``bash -n``) may run (seconds).
SYNTAX_CHECK_TIMEOUT_S = 30.0
#: Where the sandbox mounts the package.
SKILL_MOUNT = "/skill"
#: Every rule a failed check names.
RULES = ("python-compile", "bash-syntax", "self-test", "self-test-timeout", "unchecked")

_SCRIPTS_DIR = "scripts/"
_MESSAGE_CHARS = 1500
_SHELLS = ("sh", "bash")
#: Compiles a file in memory (nothing written) and says where a syntax error is.
_COMPILE = """\
import sys
path = sys.argv[1]
try:
    compile(open(path, "rb").read(), path, "exec", dont_inherit=True)
except (SyntaxError, ValueError) as exc:
    where = f"line {exc.lineno}, column {exc.offset}: " if getattr(exc, "lineno", None) else ""
    text = (getattr(exc, "text", None) or "").rstrip()
    print(f"{where}{type(exc).__name__}: {getattr(exc, 'msg', exc)}", file=sys.stderr)
    if text:
        print("    " + text, file=sys.stderr)
    sys.exit(1)
"""


class CommandOutcome(Protocol):
    """How a command in the sandbox ended (:class:`controller.client.sessions.ExecResult` is
    one): ``exit_code`` ``None`` when it was killed (by its time limit: ``timed_out``)."""

    @property
    def exit_code(self) -> int | None: ...
    @property
    def stdout(self) -> bytes: ...
    @property
    def stderr(self) -> bytes: ...
    @property
    def timed_out(self) -> bool: ...


#: Runs ``argv`` in the sandbox with a time limit in seconds, in a scratch working directory.
Runner = Callable[[Sequence[str], float], CommandOutcome]


@dataclass(frozen=True, slots=True)
class ScriptCheck:
    """The verdict on one script: ``rule`` is the rule it broke (one of :data:`RULES`; ``""``
    when ``ok``), ``message`` what failed (the error with its line, the self-test's output
    tail), at most about 1500 characters."""

    path: str
    ok: bool
    rule: str
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "ok": self.ok, "rule": self.rule, "message": self.message}

    def describe(self) -> str:
        """One line for a person or the optimizer: the file, the rule, what failed."""
        if self.ok:
            return f"{self.path}: passed its checks"
        return f"{self.path} breaks the rule {self.rule!r}: {self.message}"


def needs_check(path: str) -> bool:
    """Whether a package file is a script that is checked: any file under ``scripts/``."""
    return path.startswith(_SCRIPTS_DIR) and len(path) > len(_SCRIPTS_DIR) and not path.endswith("/")


def scripts_to_check(spec: SkillVersion, paths: Sequence[str]) -> list[SkillFile]:
    """The files of ``spec`` that ``paths`` name and :func:`needs_check` selects, in input
    order, each once (a path the package no longer has, deleted, is left out)."""
    files = {f.path: f for f in spec.files}
    out: list[SkillFile] = []
    for path in dict.fromkeys(paths):
        if needs_check(path) and path in files:
            out.append(files[path])
    return out


def unchecked(spec: SkillVersion, paths: Sequence[str], why: str) -> list[ScriptCheck]:
    """A failed ``unchecked`` verdict for each script of ``paths`` (the check could not run)."""
    return [
        ScriptCheck(path=f.path, ok=False, rule="unchecked", message=_cap(why))
        for f in scripts_to_check(spec, paths)
    ]


def check_scripts(
    spec: SkillVersion,
    paths: Sequence[str],
    run: Runner,
    *,
    self_test_timeout_s: float = DEFAULT_SELF_TEST_TIMEOUT_S,
) -> list[ScriptCheck]:
    """Check the scripts of ``spec`` that ``paths`` name, running each command through ``run``
    (the package mounted at :data:`SKILL_MOUNT`). One :class:`ScriptCheck` per script, in
    input order; paths outside ``scripts/`` or no longer in the package get none.

    Raises:
        Whatever ``run`` raises (the sandbox failing, not the script): the caller decides.
    """
    return [_check_one(f, run, self_test_timeout_s) for f in scripts_to_check(spec, paths)]


def _check_one(file: SkillFile, run: Runner, self_test_timeout_s: float) -> ScriptCheck:
    target = f"{SKILL_MOUNT}/{file.path}"
    language = _language(file)
    if language == "python":
        rule, argv = "python-compile", ["python3", "-I", "-c", _COMPILE, target]
    elif language == "shell":
        rule, argv = "bash-syntax", ["bash", "-n", target]
    else:
        rule, argv = "", []
    if argv:
        outcome = run(argv, SYNTAX_CHECK_TIMEOUT_S)
        if outcome.timed_out:
            return _failed(file, rule, f"the syntax check did not finish within {SYNTAX_CHECK_TIMEOUT_S:g} s")
        if outcome.exit_code != 0:
            what = "Python does not compile it" if language == "python" else "bash -n rejects it"
            return _failed(file, rule, f"{what}: {_tail(outcome)}")
    if SELF_TEST_FLAG.encode() not in file.data:
        return ScriptCheck(path=file.path, ok=True, rule="")
    return _self_test(file, language, run, self_test_timeout_s)


def _self_test(file: SkillFile, language: str, run: Runner, timeout_s: float) -> ScriptCheck:
    argv = _self_test_argv(file, language)
    if not argv:
        return _failed(
            file,
            "self-test",
            f"its text contains {SELF_TEST_FLAG} but it cannot be run: it is not executable, has no "
            "#! line and is neither Python nor shell",
        )
    shown = " ".join(a.removeprefix(f"{SKILL_MOUNT}/") for a in argv)
    outcome = run(argv, timeout_s)
    if outcome.timed_out:
        return _failed(
            file,
            "self-test-timeout",
            f"its self-test (`{shown}`) did not end within {timeout_s:g} s; a self-test must finish "
            f"on its own, quickly. Output before it was stopped: {_tail(outcome)}",
        )
    if outcome.exit_code == 0:
        return ScriptCheck(path=file.path, ok=True, rule="")
    signal = getattr(outcome, "signal", 0)
    if outcome.exit_code is not None:
        how = f"exited with {outcome.exit_code}"
    elif getattr(outcome, "oom_killed", False):
        how = "was killed: out of memory"
    elif getattr(outcome, "output_limit_exceeded", False):
        how = "was killed: it wrote more output than allowed"
    else:
        how = f"was killed (signal {signal})" if signal else "was killed"
    return _failed(file, "self-test", f"its self-test (`{shown}`) {how}: {_tail(outcome)}")


def _self_test_argv(file: SkillFile, language: str) -> list[str]:
    """How to run the script's self-test ([] when it cannot be run)."""
    target = f"{SKILL_MOUNT}/{file.path}"
    shebang = _shebang(file.data)
    if language == "python":
        return ["python3", target, SELF_TEST_FLAG]
    if language == "shell":
        shell = "sh" if _interpreter(shebang) == "sh" else "bash"
        return [shell, target, SELF_TEST_FLAG]
    if file.executable:
        return [target, SELF_TEST_FLAG]
    if shebang:
        return [*shebang, target, SELF_TEST_FLAG]
    return []


def _language(file: SkillFile) -> str:
    """``python``, ``shell`` or ``""`` (unknown), by extension, else by the ``#!`` line."""
    suffix = PurePosixPath(file.path).suffix
    if suffix == ".py":
        return "python"
    if suffix in (".sh", ".bash"):
        return "shell"
    interpreter = _interpreter(_shebang(file.data))
    if interpreter.startswith("python"):
        return "python"
    if interpreter in _SHELLS:
        return "shell"
    return ""


def _shebang(data: bytes) -> list[str]:
    """The words of the ``#!`` line ([] without one)."""
    if not data.startswith(b"#!"):
        return []
    line = data[2:].split(b"\n", 1)[0].decode("utf-8", "replace")
    return line.split()


def _interpreter(shebang: list[str]) -> str:
    """The interpreter's name in a ``#!`` line (``/usr/bin/env -S python3 -u`` → ``python3``)."""
    words = list(shebang)
    if words and PurePosixPath(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    return PurePosixPath(words[0]).name if words else ""


def _failed(file: SkillFile, rule: str, message: str) -> ScriptCheck:
    return ScriptCheck(path=file.path, ok=False, rule=rule, message=_cap(message))


def _tail(outcome: CommandOutcome) -> str:
    """The end of what the command wrote (stderr, else stdout), or a note that it wrote nothing."""
    text = (outcome.stderr or outcome.stdout).decode("utf-8", "replace").strip()
    if not text:
        return "(no output)"
    budget = _MESSAGE_CHARS - 300
    return text if len(text) <= budget else "…" + text[-budget:]


def _cap(message: str) -> str:
    return message if len(message) <= _MESSAGE_CHARS else message[: _MESSAGE_CHARS - 1] + "…"
