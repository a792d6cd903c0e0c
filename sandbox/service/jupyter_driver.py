"""The in-container driver of ``/run_jupyter``: cells run in order in one Python process, sharing
one namespace, like a notebook's kernel.

Not imported by the service: :mod:`sandbox.service.coderun` writes this file's source into the
container (``/tmp``) and runs it with ``python3``; it needs nothing but the standard library.
Its input is one JSON object on stdin (``cells``, ``cell_timeout``, ``out``, ``cap``); each
cell's result is appended to ``out`` as one JSON line as soon as the cell ends (so a run cut
short by the total timeout still reports the cells it finished): its stdout and stderr (the
process's own file descriptors, so subprocesses' output counts), the value of a last
expression as Jupyter's ``display`` data (``{"text/plain": repr(value)}``), and an error
(``ename``, ``evalue``, ``traceback``) that stops the run. The code is untrusted like any other:
what it does to this driver only changes its own result.
"""

from __future__ import annotations

import ast
import json
import os
import signal
import sys
import tempfile
import traceback
from types import FrameType
from typing import IO, Any


class CellTimeout(BaseException):
    """The cell ran past ``cell_timeout`` (a BaseException: ``except Exception`` in a cell does
    not swallow it)."""


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise CellTimeout


def _read(handle: IO[bytes], budget: int) -> tuple[str, bool]:
    handle.seek(0)
    data = handle.read(max(budget, 0) + 1)
    text = data[:budget].decode("utf-8", "replace")
    return text, len(data) > budget


def _run(source: str, name: str, namespace: dict[str, Any], display: list[dict[str, str]]) -> None:
    tree = ast.parse(source, name, "exec")
    last = None
    tail = tree.body[-1] if tree.body else None
    if isinstance(tail, ast.Expr):  # a last expression's value is displayed, as a kernel does
        tree.body.pop()
        last = ast.Expression(tail.value)
    exec(compile(tree, name, "exec"), namespace)
    if last is not None:
        value = eval(compile(last, name, "eval"), namespace)
        if value is not None:
            namespace["_"] = value
            display.append({"text/plain": repr(value)})


def run_cell(
    source: str, index: int, namespace: dict[str, Any], timeout: float, budget: int
) -> tuple[dict[str, Any], int]:
    """One cell's result (and the output bytes it used of ``budget``)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        return _run_captured(source, index, namespace, timeout, budget, (out, err))


def _run_captured(
    source: str,
    index: int,
    namespace: dict[str, Any],
    timeout: float,
    budget: int,
    captured: tuple[IO[bytes], IO[bytes]],
) -> tuple[dict[str, Any], int]:
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    os.dup2(captured[0].fileno(), 1)
    os.dup2(captured[1].fileno(), 2)
    display: list[dict[str, str]] = []
    error: list[dict[str, Any]] = []
    try:
        if timeout > 0:
            signal.setitimer(signal.ITIMER_REAL, timeout)
        _run(source, f"<cell {index}>", namespace, display)
    except CellTimeout:
        error.append({"ename": "TimeoutError", "evalue": f"cell ran past {timeout:g} s", "traceback": []})
    except BaseException as exc:  # SystemExit and KeyboardInterrupt too: a kernel reports them
        tb = exc.__traceback__  # from the cell's own frames on: the driver's are noise
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
            tb = tb.tb_next
        lines = traceback.format_exception(type(exc), exc, tb)
        error.append({"ename": type(exc).__name__, "evalue": str(exc), "traceback": lines})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])
    stdout, cut_out = _read(captured[0], budget)
    used = len(stdout.encode("utf-8", "replace"))
    stderr, cut_err = _read(captured[1], budget - used)
    used += len(stderr.encode("utf-8", "replace"))
    if cut_out or cut_err:
        stderr += "\n[skillopt: output beyond the run's cap was dropped]\n"
    for item in display:
        item["text/plain"] = item["text/plain"][: max(budget - used, 0)]
        used += len(item["text/plain"])
    return {"stdout": stdout, "stderr": stderr, "display": display, "error": error}, used


def main() -> None:
    spec = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    signal.signal(signal.SIGALRM, _alarm)
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    budget = int(spec["cap"])
    with open(spec["out"], "w", encoding="utf-8") as out:
        for index, cell in enumerate(spec["cells"]):
            result, used = run_cell(cell, index, namespace, float(spec["cell_timeout"]), budget)
            budget -= used
            out.write(json.dumps(result) + "\n")
            out.flush()
            if result["error"]:
                break


if __name__ == "__main__":
    main()
