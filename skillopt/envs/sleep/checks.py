"""The trusted checks of a mined task's reference: a response (and, for the container kinds,
the agent's workspace after it finished) → a :class:`~skillopt.agents.qa.Verdict`.

* ``answer``: the extracted answer against the reference answer, SQuAD-normalised exact match
  (hard) and token F1 (soft); needs no container (the ``qa`` agent, or a CLI's final message).
* ``command`` / ``tests``: the reference command runs with ``bash -lc`` in the agent's own
  workspace *after* the CLI has exited (the agent never sees it); exit 0 passes.
* ``file``: the file at the reference path is read from that workspace; its text must equal the
  reference content once line ends and trailing blanks are normalised.

Limit, on purpose for now: the command runs in the container the agent worked in, so an agent
that tampered with its tools there (a ``pytest`` that always passes) could pass. A fresh grading
container with only the agent's changed files copied in (the code envs' way,
``ctx.fresh_grading_sandbox``) is the stronger form and is left for later (docs/sleep.md).
"""

from __future__ import annotations

from skillopt.agents.qa import Verdict
from skillopt.agents.sandbox import Sandbox, read_output
from skillopt.envs._qa.text import exact_match, extract_answer, token_f1
from skillopt.envs.sleep.items import SleepGold

__all__ = ["check_answer", "check_workspace", "normalise_file"]

_MAX_FILE_BYTES = 1024 * 1024
_TAIL = 2000


def check_answer(response: str, gold: SleepGold) -> Verdict:
    """EM (hard) and token F1 (soft) of the extracted answer against the reference answer."""
    answer = extract_answer(response)
    em, f1 = exact_match(answer, [gold.answer]), token_f1(answer, [gold.answer])
    return Verdict(
        hard=em,
        soft=f1,
        answer=answer,
        fail_reason=""
        if em
        else f"EM=0: predicted {answer[:200]!r} but the accepted answer was {gold.answer[:200]!r}",
        metrics={"em": em, "f1": f1, "kind": "answer"},
        report=(
            f"[EVALUATION RESULT]\nPredicted answer: {answer!r}\n"
            f"Answer the user accepted in the session: {gold.answer!r}\nEM={em:.0f}"
        ),
    )


def normalise_file(text: str) -> str:
    """File text compared for a ``file`` reference: ``\\n`` line ends, no trailing blanks on a
    line, no blank lines at the end."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n")


def check_workspace(sandbox: Sandbox, gold: SleepGold, *, response: str, timeout_s: float) -> Verdict:
    """Check a ``command``, ``tests`` or ``file`` reference in the agent's workspace.

    Raises:
        InfraError: the sandbox itself failed (never a score).
    """
    if gold.kind == "file":
        data = read_output(sandbox, gold.path, max_bytes=_MAX_FILE_BYTES)
        got = None if data is None else data.decode("utf-8", "replace")
        ok = got is not None and normalise_file(got) == normalise_file(gold.content)
        why = (
            ""
            if ok
            else (f"{gold.path} is missing" if got is None else f"{gold.path} differs from the accepted file")
        )
        report = (
            f"[EVALUATION RESULT]\nFile {gold.path}: {'as accepted' if ok else why}\n"
            f"Accepted content:\n{gold.content[:_TAIL]}\nContent left by the agent:\n{(got or '')[:_TAIL]}"
        )
        return Verdict(
            hard=float(ok), soft=float(ok), answer=(got or "")[:200], fail_reason=why,
            metrics={"kind": "file"}, report=report,
        )  # fmt: skip
    out = sandbox.run_command(["bash", "-lc", gold.command], timeout_s=timeout_s)
    ok = out.exit_code == 0 and not out.timed_out
    label = "timeout" if out.timed_out else str(out.exit_code)
    why = "" if ok else f"reference {gold.kind} command `{gold.command}` exited {label}"
    report = (
        f"[EVALUATION RESULT]\nReference command: {gold.command}\nExit: {label}\n"
        f"stdout (tail):\n{out.stdout_tail[-_TAIL:]}\nstderr (tail):\n{out.stderr_tail[-_TAIL:]}"
    )
    return Verdict(
        hard=float(ok), soft=float(ok), answer=extract_answer(response)[:200], fail_reason=why,
        metrics={"kind": gold.kind, "reference_exit": label}, report=report,
    )  # fmt: skip
