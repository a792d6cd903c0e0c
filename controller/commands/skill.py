"""``skillopt skill``: check, look at, compare and install Agent Skills packages.

A skill is a package folder named after it (SKILL.md with a front matter, plus optional
``scripts/``, ``references/``, ``assets/``) or a lone SKILL.md; :mod:`skillopt.skill.package`
holds the rules. Every command also takes a run directory (RUN) and then means the run's best
skill (``best_skill/<name>/``, else ``best_skill.md``), or with ``--version N`` the skill after
step N (``skill_packages/vNNNN/<name>/``, else ``skills/skill_vNNNN.md``).

Exit status: 0 done; 1 the skill breaks a rule (each problem listed: file, rule, message) or
``install`` refused to replace a different skill; 2 nothing readable at the path, or bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillopt.errors import SkillError
from skillopt.skill.install import HARNESSES
from skillopt.units import size_text

if TYPE_CHECKING:
    from skillopt.skill.diff import FileChange
    from skillopt.skill.package import PackageLimits, PackageProblem
    from skillopt.types import SkillVersion

__all__ = ["register"]

EXIT_INVALID = 1
EXIT_UNREADABLE = 2


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``skillopt skill`` and its four actions (each built by its own function below)."""
    p = sub.add_parser(
        "skill",
        help="check, show, diff and install skill packages (a folder with SKILL.md, or a run's best skill)",
        description=_wrap(
            "Agent Skills packages (agentskills.io): a folder named after the skill holding SKILL.md "
            "(front matter name/description, then the body) and optional scripts/, references/, "
            "assets/. PATH is such a folder or a lone SKILL.md; RUN is a run directory (its best "
            "skill, or with --version N the skill after step N).",
            "  skillopt skill validate my-skill/\n"
            "  skillopt skill show runs/demo                  # the run's best skill\n"
            "  skillopt skill diff runs/demo runs/demo --a-version 0   # what training changed\n"
            "  skillopt skill install runs/demo --harness claude-code   # -> ./.claude/skills/<name>/\n"
            "  skillopt skill install my-skill/ --harness codex --scope user   # -> ~/.agents/skills/<name>/",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="skill_command", metavar="ACTION")
    actions.required = True
    for add in (_validate_parser, _show_parser, _diff_parser, _install_parser):
        add(actions)


def _validate_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt skill validate PATH|RUN``: the rules, and the limits to check against."""
    v = actions.add_parser(
        "validate",
        help="check the standard's rules and ours; exit 1 listing every problem",
        description=(
            "Check a skill against the Agent Skills standard (front matter fields, name, description; "
            "the checks of its reference validator skills-ref) and skillopt's own rules (name equal to "
            "the folder, no symlinks, no '..' or absolute paths, UTF-8 text outside assets/, at most "
            "--max-files files and --max-bytes bytes). Prints one OK line (name, files, bytes) and "
            "exits 0, or lists every problem (file, rule, message) and exits 1."
        ),
    )
    _source_args(v)
    v.add_argument("--max-files", type=int, default=None, metavar="N", help="files allowed (default 200)")
    v.add_argument(
        "--max-bytes", type=int, default=None, metavar="N", help="bytes allowed in all (default 8 MiB)"
    )
    v.add_argument("--json", action="store_true", help="one JSON object: ok, name, files, bytes, problems")
    v.set_defaults(func=_validate)


def _show_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt skill show PATH|RUN``: the front matter and the tree of files."""
    s = actions.add_parser(
        "show",
        help="the package's tree (sizes, executables) and front matter",
        description="Print a skill's front matter and its files as a tree, with sizes; '*' marks executables.",
    )
    _source_args(s)
    s.add_argument(
        "--json", action="store_true", help="one JSON object: name, front matter, files, tree hash"
    )
    s.set_defaults(func=_show)


def _diff_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt skill diff A B``: two skills compared file by file."""
    d = actions.add_parser(
        "diff",
        help="what changed from A to B, file by file",
        description=(
            "Compare two skills (each a PATH or a RUN): every file added, removed or changed, with a "
            "unified diff for text files and the size change for binary ones. Exit 0 whether or not "
            "they differ. What a run's training changed: skillopt skill diff RUN RUN --a-version 0"
        ),
    )
    d.add_argument("a", metavar="A", help="the old skill: a package folder, a SKILL.md, or a run directory")
    d.add_argument("b", metavar="B", help="the new skill: a package folder, a SKILL.md, or a run directory")
    d.add_argument(
        "--a-version",
        type=int,
        default=None,
        metavar="N",
        help="A is a run: its skill after step N, not its best",
    )
    d.add_argument(
        "--b-version",
        type=int,
        default=None,
        metavar="N",
        help="B is a run: its skill after step N, not its best",
    )
    d.add_argument(
        "--context", type=int, default=3, metavar="N", help="lines of context in diffs (default 3)"
    )
    d.add_argument("--json", action="store_true", help="one JSON object: {a, b, summary, changes: [...]}")
    d.set_defaults(func=_diff)


def _install_parser(actions: argparse._SubParsersAction) -> None:
    """``skillopt skill install PATH|RUN --harness H``: where the copy goes."""
    i = actions.add_parser(
        "install",
        help="copy a skill where Claude Code or Codex discovers it",
        description=_wrap(
            "Validate a skill, then copy it as a package folder where a harness discovers skills. "
            "A one-file SKILL.md without front matter gets one (its name, its first line as the "
            "description). An installed skill that differs is replaced only with --force; the same "
            "skill is left as it is.",
            "  claude-code  project: DIR/.claude/skills/<name>/   user: ~/.claude/skills/<name>/\n"
            "               ($CLAUDE_CONFIG_DIR/skills/<name>/ when that is set)\n"
            "  codex        project: DIR/.agents/skills/<name>/   user: ~/.agents/skills/<name>/",
            heading="Where:",
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _source_args(i)
    i.add_argument("--harness", required=True, choices=sorted(HARNESSES), help="the agent that will use it")
    i.add_argument(
        "--scope",
        choices=("project", "user"),
        default="project",
        help="project: for the agent run in DIR (default); user: for every project of this user",
    )
    i.add_argument("--dir", default=None, metavar="DIR", help="the project folder (default: the current one)")
    i.add_argument("--force", action="store_true", help="replace a different skill installed under that name")
    i.set_defaults(func=_install)


def _wrap(prose: str, block: str, *, heading: str = "Examples:") -> str:
    """A description for RawDescriptionHelpFormatter: ``prose`` wrapped, then ``block`` as is."""
    return textwrap.fill(prose, 92, break_on_hyphens=False) + f"\n\n{heading}\n{block}"


def _source_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="PATH|RUN", help="a package folder, a SKILL.md, or a run directory")
    p.add_argument(
        "--version",
        type=int,
        default=None,
        metavar="N",
        help="with RUN: the skill after step N (0: the initial skill) instead of the best one",
    )


# ── finding the skill ─────────────────────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class _Source:
    """Where a skill was found: ``path`` (a folder or a file) and how to say it."""

    path: Path
    label: str


def _is_run(path: Path) -> bool:
    from skillopt.skill.package import SKILL_MD
    from skillopt.trainer.rundir import layout

    if not path.is_dir() or (path / SKILL_MD).exists():
        return False
    return any((path / m).exists() for m in (*layout.MARKERS, layout.BEST_SKILL, layout.BEST_SKILL_DIR))


def _package_in(folder: Path) -> Path | None:
    """The package folder inside ``folder`` (hidden ones are a writer's temporaries).

    Raises:
        SkillError: there are several.
    """
    if not folder.is_dir():
        return None
    found = [d for d in sorted(folder.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    if len(found) > 1:
        names = ", ".join(d.name for d in found)
        raise SkillError(f"{folder} holds several packages ({names}): give the one you mean as a path")
    return found[0] if found else None


def _locate(source: str, version: int | None) -> _Source:
    """The skill ``source`` names.

    Raises:
        SkillError: nothing there, or a run without that skill.
    """
    from skillopt.trainer.rundir import layout

    path = Path(source)
    if not path.exists():
        raise SkillError(f"{source}: no such file or folder")
    if not _is_run(path):
        if version is not None:
            raise SkillError(f"{source}: --version needs a run directory, and this is a skill")
        return _Source(path, str(path))
    if version is None:
        package, single, what = path / layout.BEST_SKILL_DIR, path / layout.BEST_SKILL, "best skill"
    else:
        if version < 0:
            raise SkillError(f"--version {version}: steps count from 0")
        package = path / layout.skill_package_dir(version)
        single, what = path / layout.skill_file(version), f"skill after step {version}"
    found = _package_in(package)
    if found is not None:
        return _Source(found, f"{found} (run {path}, {what})")
    if single.is_file():
        return _Source(single, f"{single} (run {path}, {what})")
    raise SkillError(
        f"{source}: this run has no {what} yet (neither {package.relative_to(path)}/<name>/ "
        f"nor {single.relative_to(path)})"
    )


def _limits(args: argparse.Namespace) -> PackageLimits:
    from skillopt.skill.package import PackageLimits

    given = {
        k: v
        for k, v in (
            ("max_files", getattr(args, "max_files", None)),
            ("max_bytes", getattr(args, "max_bytes", None)),
        )
        if v is not None
    }
    return PackageLimits(**given)


def _problem_lines(problems: Sequence[PackageProblem]) -> list[str]:
    width = max((len(p.path or "package") for p in problems), default=0)
    rule_width = max((len(p.rule) for p in problems), default=0)
    return [f"  {(p.path or 'package'):<{width}}  {p.rule:<{rule_width}}  {p.message}" for p in problems]


def _fail(command: str, exc: SkillError) -> int:
    """Print ``exc`` for ``skillopt skill COMMAND``; the exit status it means."""
    from skillopt.skill.package import SkillPackageError

    if isinstance(exc, SkillPackageError):
        print(f"skillopt skill {command}: {exc.where}: {len(exc.problems)} problem(s)", file=sys.stderr)
        for line in _problem_lines(exc.problems):
            print(line, file=sys.stderr)
        return EXIT_INVALID
    print(f"skillopt skill {command}: {exc.message}", file=sys.stderr)
    return EXIT_UNREADABLE


def _total_bytes(spec: SkillVersion) -> int:
    return len(spec.content.encode("utf-8")) + sum(len(f.data) for f in spec.files)


# ── validate ──────────────────────────────────────────────────────────────────────────────


def _validate(args: argparse.Namespace) -> int:
    from skillopt.skill.package import front_matter, read_skill

    try:
        src = _locate(args.source, args.version)
        spec, problems = read_skill(src.path, limits=_limits(args))
    except SkillError as exc:
        return _fail("validate", exc)
    if args.json:
        out: dict[str, Any] = {
            "ok": not problems,
            "path": str(src.path),
            "source": src.label,
            "name": spec.name,
        }
        if not problems:
            out.update(
                files=1 + len(spec.files),
                bytes=_total_bytes(spec),
                tree_sha256=spec.tree_sha256,
                front_matter=front_matter(spec.content)[0] is not None,
            )
        out["problems"] = [{"path": p.path, "rule": p.rule, "message": p.message} for p in problems]
        print(json.dumps(out, ensure_ascii=False))
        return EXIT_INVALID if problems else 0
    if problems:
        print(f"INVALID {src.label}: {len(problems)} problem(s)")
        for line in _problem_lines(problems):
            print(line)
        return EXIT_INVALID
    one_file = front_matter(spec.content)[0] is None
    note = " (one-file skill without front matter: installed, it gets one)" if one_file else ""
    print(f"OK {spec.name}: {1 + len(spec.files)} file(s), {_total_bytes(spec)} bytes ({src.label}){note}")
    return 0


def _read_leniently(command: str, src: _Source) -> SkillVersion:
    """The skill at ``src`` even when it breaks rules (they are listed on stderr)."""
    from skillopt.skill.package import read_skill

    spec, problems = read_skill(src.path)
    if problems:
        print(f"skillopt skill {command}: warning: {src.label} is not a valid package:", file=sys.stderr)
        for line in _problem_lines(problems):
            print(line, file=sys.stderr)
    return spec


# ── show ──────────────────────────────────────────────────────────────────────────────────


def _tree_lines(spec: SkillVersion) -> list[tuple[str, str]]:
    """``(left, right)`` per line: the tree drawing with a name, and its size and mark."""
    from skillopt.skill.package import SKILL_MD

    root: dict[str, Any] = {}
    entries = [(SKILL_MD, len(spec.content.encode("utf-8")), False)]
    entries += [(f.path, len(f.data), f.executable) for f in spec.files]
    for path, size, executable in entries:
        node = root
        *folders, leaf = path.split("/")
        for folder in folders:
            node = node.setdefault(folder + "/", {})
        node[leaf] = (size, executable)

    lines: list[tuple[str, str]] = [(f"{spec.name}/", "")]

    def walk(node: dict[str, Any], prefix: str) -> None:
        names = sorted(node, key=lambda n: (n != SKILL_MD, n))
        for k, name in enumerate(names):
            last = k == len(names) - 1
            branch, below = ("└── ", "    ") if last else ("├── ", "│   ")
            value = node[name]
            if isinstance(value, dict):
                lines.append((prefix + branch + name, ""))
                walk(value, prefix + below)
            else:
                size, executable = value
                lines.append(
                    (prefix + branch + name, f"{size_text(size):>9}" + ("  *" if executable else ""))
                )

    walk(root, "")
    return lines


def _show(args: argparse.Namespace) -> int:
    from skillopt.skill.package import SkillPackageError, front_matter

    try:
        src = _locate(args.source, args.version)
        spec = _read_leniently("show", src)
    except SkillError as exc:
        return _fail("show", exc)
    try:
        fields, _ = front_matter(spec.content)
    except SkillPackageError:
        fields = None  # listed with the problems above
    if args.json:
        files = [
            {
                "path": "SKILL.md",
                "size": len(spec.content.encode("utf-8")),
                "executable": False,
                "sha256": spec.sha256,
            }
        ]
        files += [
            {"path": f.path, "size": len(f.data), "executable": f.executable, "sha256": f.sha256}
            for f in spec.files
        ]
        print(
            json.dumps(
                {
                    "name": spec.name,
                    "path": str(src.path),
                    "source": src.label,
                    "front_matter": fields,
                    "files": files,
                    "bytes": _total_bytes(spec),
                    "tree_sha256": spec.tree_sha256,
                },
                ensure_ascii=False,
            )
        )
        return 0
    n = 1 + len(spec.files)
    print(f"{spec.name}: {n} file(s), {size_text(_total_bytes(spec))}, tree {spec.tree_sha256[:12]}")
    print(f"from {src.label}")
    print()
    if fields is None:
        print("front matter: none (a one-file skill; installed, it gets name and description)")
    else:
        print("front matter:")
        for key, value in fields.items():
            if isinstance(value, dict):
                print(f"  {key}:")
                for k, v in value.items():
                    print(f"    {k}: {v}")
            else:
                print(f"  {key}: {value}")
    print()
    lines = _tree_lines(spec)
    width = max(len(left) for left, _ in lines)
    for left, right in lines:
        print(f"{left:<{width}}  {right}".rstrip())
    if any(f.executable for f in spec.files):
        print("\n* executable")
    return 0


# ── diff ──────────────────────────────────────────────────────────────────────────────────


def _diff(args: argparse.Namespace) -> int:
    from skillopt.skill.diff import diff_summary, package_diff

    try:
        a_src, b_src = _locate(args.a, args.a_version), _locate(args.b, args.b_version)
        a, b = _read_leniently("diff", a_src), _read_leniently("diff", b_src)
    except SkillError as exc:
        return _fail("diff", exc)
    changes = package_diff(a, b, context=max(0, args.context))
    summary = diff_summary(changes)
    if args.json:
        print(
            json.dumps(
                {
                    "a": {"name": a.name, "source": a_src.label, "tree_sha256": a.tree_sha256},
                    "b": {"name": b.name, "source": b_src.label, "tree_sha256": b.tree_sha256},
                    "summary": summary,
                    "changes": [c.to_json() for c in changes],
                },
                ensure_ascii=False,
            )
        )
        return 0
    print(f"a: {a.name} ({a_src.label})")
    print(f"b: {b.name} ({b_src.label})")
    if a.name != b.name:
        print(f"renamed: {a.name} -> {b.name}")
    print(summary)
    for c in changes:
        print()
        print(_change_header(c))
        if c.diff:
            print(c.diff, end="")
    return 0


def _change_header(c: FileChange) -> str:
    """``changed scripts/run.sh (1.0 KiB -> 1.2 KiB, now executable)`` and the like."""
    notes = []
    if c.status == "added":
        notes.append(size_text(c.new_size or 0))
        notes += ["executable"] if c.new_executable else []
    elif c.status == "removed":
        notes.append(size_text(c.old_size or 0))
    else:
        notes.append(
            f"{size_text(c.old_size or 0)} -> {size_text(c.new_size or 0)}"
            if c.content_changed
            else "same bytes"
        )
        if c.mode_changed:
            notes.append("now executable" if c.new_executable else "no longer executable")
    notes += ["binary"] if c.binary else []
    return f"{c.status} {c.path} ({', '.join(notes)})"


# ── install ──────────────────────────────────────────────────────────────────────────────


def _install(args: argparse.Namespace) -> int:
    from skillopt.errors import SkillInstallRefused
    from skillopt.skill.diff import diff_summary, package_diff
    from skillopt.skill.install import install_skill, skills_root
    from skillopt.skill.package import as_package, check_package, load_skill

    if args.scope == "user" and args.dir is not None:
        print(
            "skillopt skill install: --dir is the project folder; it goes with --scope project",
            file=sys.stderr,
        )
        return EXIT_UNREADABLE
    try:
        src = _locate(args.source, args.version)
        spec = check_package(as_package(load_skill(src.path)), where=src.label)
    except SkillError as exc:
        return _fail("install", exc)
    project = Path(args.dir) if args.dir is not None else Path.cwd()
    if args.scope == "project" and not project.is_dir():
        print(f"skillopt skill install: --dir {project}: no such folder", file=sys.stderr)
        return EXIT_UNREADABLE
    root = skills_root(args.harness, args.scope, project).absolute()
    dest = root / spec.name
    harness = HARNESSES[args.harness][0]
    try:
        outcome = install_skill(spec, root, force=args.force)
    except SkillInstallRefused as exc:
        there = exc.there
        what = diff_summary(package_diff(there, spec)) if there is not None else "not a valid skill package"
        print(
            f"skillopt skill install: {dest} holds a different skill ({what}); "
            "--force replaces it (see: skillopt skill diff)",
            file=sys.stderr,
        )
        return EXIT_INVALID
    except OSError as exc:
        print(f"skillopt skill install: cannot write {dest}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_UNREADABLE
    if outcome.unchanged:
        print(f"already installed: {spec.name} at {dest}/ is this skill (tree {spec.tree_sha256[:12]})")
        return 0
    where = (
        f"for {harness} run in {project.absolute()}"
        if args.scope == "project"
        else f"for every {harness} run of this user"
    )
    print(
        f"installed {spec.name} ({1 + len(spec.files)} file(s), {size_text(_total_bytes(spec))}) at {outcome.path}/ ({where})"
    )
    return 0
