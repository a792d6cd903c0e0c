"""Script checks as pure logic: which files are checked, which command each rule runs, how an
outcome becomes a verdict. The commands go through a recording ``run`` that answers with the
outcome a test chose (the Docker side is in tests/controller/test_script_checks.py); the
syntax checks' own commands run here too, on the test's own files, to show what they report."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from controller.client.sessions import ExecResult
from skillopt.skill.checks import (
    DEFAULT_SELF_TEST_TIMEOUT_S,
    SELF_TEST_FLAG,
    SKILL_MOUNT,
    SYNTAX_CHECK_TIMEOUT_S,
    ScriptCheck,
    check_scripts,
    needs_check,
    unchecked,
)
from skillopt.types import SkillFile, SkillVersion

OK = ExecResult(exit_code=0, stdout=b"", stderr=b"")


def spec(*files: SkillFile) -> SkillVersion:
    return SkillVersion(name="pkg", content="# Pkg\n", files=tuple(sorted(files, key=lambda f: f.path)))


class Recorder:
    """A ``run`` that records each ``(argv, timeout)`` and answers with ``answer(argv)``."""

    def __init__(self, answer: Callable[[list[str]], ExecResult] = lambda _argv: OK) -> None:
        self.answer = answer
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: Sequence[str], timeout_s: float) -> ExecResult:
        self.calls.append((list(argv), timeout_s))
        return self.answer(list(argv))

    @property
    def argvs(self) -> list[list[str]]:
        return [argv for argv, _ in self.calls]


def self_test_answer(outcome: ExecResult) -> Callable[[list[str]], ExecResult]:
    """Syntax checks pass; the self-test ends with ``outcome``."""
    return lambda argv: outcome if argv[-1] == SELF_TEST_FLAG else OK


@pytest.mark.parametrize(
    ("path", "checked"),
    [
        ("scripts/a.py", True),
        ("scripts/tools/run", True),
        ("scripts/data.json", True),
        ("scripts/", False),
        ("SKILL.md", False),
        ("references/a.py", False),
        ("assets/scripts/a.sh", False),
        ("scriptsx/a.py", False),
    ],
)
def test_only_files_under_scripts_are_checked(path, checked):
    assert needs_check(path) is checked


def test_python_is_compiled_from_the_read_only_mount_and_a_clean_script_passes():
    run = Recorder()
    checks = check_scripts(spec(SkillFile(path="scripts/a.py", data=b"x = 1\n")), ["scripts/a.py"], run)
    assert checks == [ScriptCheck(path="scripts/a.py", ok=True, rule="")]
    ((argv, timeout),) = run.calls
    assert argv[0] == "python3" and argv[-1] == f"{SKILL_MOUNT}/scripts/a.py"
    assert "compile(" in argv[-2] and "py_compile" not in " ".join(argv)
    assert timeout == SYNTAX_CHECK_TIMEOUT_S


def test_a_compile_error_is_reported_with_its_output_and_skips_the_self_test():
    error = b"line 3, column 9: SyntaxError: '(' was never closed\n    print((\n"
    run = Recorder(lambda _argv: ExecResult(exit_code=1, stdout=b"", stderr=error))
    source = f"import sys\nif '{SELF_TEST_FLAG}' in sys.argv:\n    print((\n".encode()
    (check,) = check_scripts(spec(SkillFile(path="scripts/t.py", data=source)), ["scripts/t.py"], run)
    assert (check.ok, check.rule) == (False, "python-compile")
    assert "line 3" in check.message and "never closed" in check.message
    assert len(run.calls) == 1  # the self-test did not run


@pytest.mark.parametrize(
    ("path", "data", "executable"),
    [
        ("scripts/a.sh", b"echo hi\n", False),
        ("scripts/a.bash", b"echo hi\n", False),
        ("scripts/tool", b"#!/usr/bin/env bash\necho hi\n", True),
        ("scripts/tool", b"#!/bin/sh -e\necho hi\n", False),
    ],
)
def test_shell_by_extension_or_shebang_gets_bash_n(path, data, executable):
    run = Recorder(lambda _argv: ExecResult(exit_code=2, stdout=b"", stderr=b"line 1: syntax error"))
    (check,) = check_scripts(spec(SkillFile(path=path, data=data, executable=executable)), [path], run)
    assert run.argvs == [["bash", "-n", f"{SKILL_MOUNT}/{path}"]]
    assert (check.ok, check.rule) == (False, "bash-syntax") and "line 1: syntax error" in check.message


def test_a_python_shebang_without_extension_is_compiled():
    run = Recorder()
    path = "scripts/tool"
    file = SkillFile(path=path, data=b"#!/usr/bin/env -S python3 -u\nprint(1)\n", executable=True)
    assert check_scripts(spec(file), [path], run)[0].ok
    assert run.argvs[0][0] == "python3" and run.argvs[0][-1] == f"{SKILL_MOUNT}/{path}"


@pytest.mark.parametrize(
    ("file", "argv"),
    [
        (SkillFile(path="scripts/t.py", data=b"# --self-test\n"), ["python3", "/skill/scripts/t.py"]),
        (SkillFile(path="scripts/t.sh", data=b"# --self-test\n"), ["bash", "/skill/scripts/t.sh"]),
        (SkillFile(path="scripts/t", data=b"#!/bin/sh\n# --self-test\n"), ["sh", "/skill/scripts/t"]),
        (SkillFile(path="scripts/t.js", data=b"// --self-test\n", executable=True), ["/skill/scripts/t.js"]),
        (SkillFile(path="scripts/t.js", data=b"#!/usr/bin/env node\n// --self-test\n"),
         ["/usr/bin/env", "node", "/skill/scripts/t.js"]),
    ],
)  # fmt: skip
def test_a_script_that_mentions_the_flag_runs_its_self_test_with_the_time_limit(file, argv):
    run = Recorder()
    (check,) = check_scripts(spec(file), [file.path], run, self_test_timeout_s=2.5)
    assert check.ok
    assert run.calls[-1] == ([*argv, SELF_TEST_FLAG], 2.5)


def test_a_script_without_the_flag_runs_no_self_test_and_an_unknown_language_runs_nothing():
    run = Recorder()
    files = [
        SkillFile(path="scripts/a.py", data=b"print('self test')\n"),
        SkillFile(path="scripts/data.csv", data=b"a,b\n1,2\n"),
    ]
    checks = check_scripts(spec(*files), ["scripts/a.py", "scripts/data.csv"], run)
    assert [c.ok for c in checks] == [True, True]
    assert len(run.calls) == 1 and run.calls[0][0][0] == "python3"


def test_a_failing_self_test_is_reported_with_its_stderr():
    failed = ExecResult(exit_code=1, stdout=b"ran 3 cases\n", stderr=b"AssertionError: 2 != 3\n")
    run = Recorder(self_test_answer(failed))
    file = SkillFile(path="scripts/t.py", data=b"# --self-test\n")
    (check,) = check_scripts(spec(file), [file.path], run)
    assert (check.ok, check.rule) == (False, "self-test")
    assert "exited with 1" in check.message and "AssertionError: 2 != 3" in check.message
    assert check.describe().startswith("scripts/t.py breaks the rule 'self-test'")


def test_a_self_test_that_never_ends_is_refused_naming_the_file_and_the_rule():
    hung = ExecResult(exit_code=None, stdout=b"looping\n", stderr=b"", timed_out=True, signal=9)
    run = Recorder(self_test_answer(hung))
    file = SkillFile(path="scripts/loop.sh", data=b"# --self-test\nwhile :; do :; done\n")
    (check,) = check_scripts(spec(file), [file.path], run, self_test_timeout_s=2.0)
    assert (check.ok, check.rule) == (False, "self-test-timeout")
    assert "within 2 s" in check.message and "looping" in check.message
    assert "scripts/loop.sh" in check.describe() and "self-test-timeout" in check.describe()


def test_a_self_test_killed_for_memory_says_so():
    killed = ExecResult(exit_code=None, stdout=b"", stderr=b"", signal=9, oom_killed=True)
    file = SkillFile(path="scripts/t.py", data=b"# --self-test\n")
    (check,) = check_scripts(spec(file), [file.path], Recorder(self_test_answer(killed)))
    assert check.rule == "self-test" and "out of memory" in check.message


def test_a_self_test_that_cannot_be_run_fails_without_running():
    run = Recorder()
    file = SkillFile(path="scripts/t.txt", data=b"run me with --self-test\n")
    (check,) = check_scripts(spec(file), [file.path], run)
    assert (check.ok, check.rule) == (False, "self-test") and "cannot be run" in check.message
    assert run.calls == []


def test_one_verdict_per_script_in_input_order_deleted_and_other_files_left_out():
    files = [SkillFile(path=p, data=b"x = 1\n") for p in ("scripts/a.py", "scripts/b.py", "references/c.py")]
    run = Recorder()
    paths = ["scripts/b.py", "scripts/gone.py", "references/c.py", "scripts/a.py", "scripts/b.py"]
    assert [c.path for c in check_scripts(spec(*files), paths, run)] == ["scripts/b.py", "scripts/a.py"]
    assert [c.path for c in unchecked(spec(*files), paths, "no sandbox")] == ["scripts/b.py", "scripts/a.py"]
    assert all(not c.ok and c.rule == "unchecked" for c in unchecked(spec(*files), paths, "no sandbox"))


def test_a_long_output_is_capped_keeping_its_end():
    noise = b"x" * 10_000 + b"\nTHE-LAST-LINE\n"
    run = Recorder(self_test_answer(ExecResult(exit_code=3, stdout=b"", stderr=noise)))
    file = SkillFile(path="scripts/t.py", data=b"# --self-test\n")
    (check,) = check_scripts(spec(file), [file.path], run)
    assert len(check.message) <= 1500 and check.message.endswith("THE-LAST-LINE")
    assert check.to_dict() == {
        "path": "scripts/t.py",
        "ok": False,
        "rule": "self-test",
        "message": check.message,
    }


def test_the_default_time_limit_is_the_documented_one():
    run = Recorder()
    file = SkillFile(path="scripts/t.py", data=b"# --self-test\n")
    check_scripts(spec(file), [file.path], run)
    assert run.calls[-1][1] == DEFAULT_SELF_TEST_TIMEOUT_S == 10.0


def local_syntax_run(root: Path) -> Callable[[Sequence[str], float], ExecResult]:
    """Runs a syntax check's command here on the test's own files (the mount is ``root``)."""

    def run(argv: Sequence[str], timeout_s: float) -> ExecResult:
        assert argv[-1] != SELF_TEST_FLAG  # only the checks' own commands, never a script
        local = [a.replace(f"{SKILL_MOUNT}/", f"{root}/") for a in argv]
        done = subprocess.run(local, capture_output=True, timeout=timeout_s, check=False)
        return ExecResult(exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr)

    return run


def test_the_syntax_commands_name_the_line_and_write_nothing(tmp_path):
    files = [
        SkillFile(path="scripts/good.py", data=b"def f(x):\n    return x\n"),
        SkillFile(path="scripts/bad.py", data=b"a = 1\nb = 2\ndef f(:\n    pass\n"),
        SkillFile(path="scripts/bad_indent.py", data=b"if True:\nprint(1)\n"),
        SkillFile(path="scripts/good.sh", data=b"for i in 1 2; do echo $i; done\n"),
        SkillFile(path="scripts/bad.sh", data=b"echo a\nif true; then\n  echo b\n"),
    ]
    for f in files:
        (tmp_path / f.path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f.path).write_bytes(f.data)
    (tmp_path / "scripts").chmod(0o555)  # as read-only as the mount
    try:
        checks = check_scripts(spec(*files), [f.path for f in files], local_syntax_run(tmp_path))
    finally:
        (tmp_path / "scripts").chmod(0o755)
    verdict = {c.path: c for c in checks}
    assert verdict["scripts/good.py"].ok and verdict["scripts/good.sh"].ok
    assert verdict["scripts/bad.py"].rule == "python-compile"
    assert "line 3" in verdict["scripts/bad.py"].message and "def f(:" in verdict["scripts/bad.py"].message
    assert "IndentationError" in verdict["scripts/bad_indent.py"].message
    assert (
        verdict["scripts/bad.sh"].rule == "bash-syntax"
        and "syntax error" in verdict["scripts/bad.sh"].message
    )
    assert sorted(p.name for p in (tmp_path / "scripts").iterdir()) == sorted(
        Path(f.path).name for f in files
    )


def test_the_in_process_executor_has_no_container_and_leaves_every_script_unchecked():
    from skillopt.models.openai_chat import OpenAIChatModel
    from skillopt.testing.inprocess import InProcessExecutor

    executor = InProcessExecutor(OpenAIChatModel("sim", base_url="http://127.0.0.1:9/v1", api_key=""))
    files = [SkillFile(path="scripts/a.py", data=b"x = 1\n"), SkillFile(path="references/r.md", data=b"r")]
    checks = executor.check_scripts(spec(*files), ["scripts/a.py", "references/r.md"])
    assert [(c.path, c.ok, c.rule) for c in checks] == [("scripts/a.py", False, "unchecked")]
    assert "no sandbox container" in checks[0].message
