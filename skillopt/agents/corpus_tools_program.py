"""The ``glob``/``read``/``grep`` tools over a read-only document folder, as one stdlib-only
program that runs INSIDE the rollout container (``python3 -I -c <this file> ROOT TOOL ARGS``).
``read`` also reads the files of the agent's own skill package by their absolute path
(``/skill/references/…``; an optional fifth argument is where the package is, for tests).

It is the second line of confinement, the container being the first (no network, no secrets,
nothing of the host): every path the model names is relative to ``ROOT``; absolute paths, ``..``
and symbolic links anywhere on the way are refused; only regular files are read; every answer is
capped (50 glob matches, 400 lines and 4000 characters per read, 20 grep matches, 300
characters per grep line, 512 MiB scanned per grep). The result is printed as text for the model;
exit code 0 (also for a refused call: the refusal is the model's to read), 2 for a malformed
invocation.

Usage (what :mod:`skillopt.agents.corpus_tools` runs)::

    python3 -I -c "$(cat corpus_tools_program.py)" docs grep '{"pattern": "national defense"}'
"""

from __future__ import annotations

import fnmatch
import json
import os
import stat
import sys

MAX_GLOB = 50
MAX_READ_LINES = 400
MAX_READ_CHARS = 4000
MAX_GREP = 20
MAX_GREP_LINE = 300
MAX_GREP_BYTES = 512 * 1024 * 1024
MAX_PATTERN = 200
#: How a path names a file of the skill package (mounted read-only at /skill).
SKILL_PREFIX = "/skill/"


class Refused(Exception):
    """A call the tool will not run; the message says why and what to do instead."""


def resolve(root: str, path: str, *, want_dir: bool = False) -> str:
    """The real path of ``path`` under ``root``, or :class:`Refused`."""
    if not isinstance(path, str):
        raise Refused("the path must be a string")
    path = path.strip()
    if path.startswith("docs/"):
        path = path[len("docs/") :]
    if path.startswith(("/", "~")) or "\\" in path or "\x00" in path:
        raise Refused(f"{path[:80]!r}: absolute paths are refused; give a path relative to the corpus")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"{path[:80]!r}: '..' is refused; paths stay inside the corpus")
    current = root
    for part in parts:
        current = os.path.join(current, part)
        try:
            info = os.lstat(current)
        except OSError:
            raise Refused(f"{path[:80]!r}: no such file in the corpus (use glob to list files)") from None
        if stat.S_ISLNK(info.st_mode):
            raise Refused(f"{path[:80]!r}: symbolic links are not followed")
    info = os.lstat(current)
    if want_dir and stat.S_ISDIR(info.st_mode):
        return current
    if not stat.S_ISREG(info.st_mode):
        raise Refused(f"{path[:80]!r}: not a regular file")
    return current


def walk(base: str):
    """Regular files under ``base`` (sorted, symbolic links never followed)."""
    for top, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(top, d)))
        for name in sorted(files):
            full = os.path.join(top, name)
            if stat.S_ISREG(os.lstat(full).st_mode):
                yield full


def rel(root: str, full: str) -> str:
    return os.path.relpath(full, root).replace(os.sep, "/")


def tool_glob(root: str, args: dict) -> str:
    pattern = args.get("pattern", "*")
    if not isinstance(pattern, str) or not pattern.strip() or len(pattern) > MAX_PATTERN:
        raise Refused(f'glob needs a pattern of 1-{MAX_PATTERN} characters, e.g. "*1941*"')
    pattern = pattern.strip().removeprefix("docs/")
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise Refused("glob patterns are relative to the corpus; '..' and absolute patterns are refused")
    names = [rel(root, f) for f in walk(root)]
    hits = [n for n in names if fnmatch.fnmatch(n, pattern) or fnmatch.fnmatch(n.rsplit("/", 1)[-1], pattern)]
    if not hits:
        return f"no file matches {pattern!r} ({len(names)} files in the corpus)"
    shown = hits[:MAX_GLOB]
    more = f"\n... and {len(hits) - MAX_GLOB} more; narrow the pattern" if len(hits) > MAX_GLOB else ""
    return "\n".join(f"{n} ({os.path.getsize(os.path.join(root, n))} bytes)" for n in shown) + more


def _int(args: dict, key: str, default: int, low: int, high: int) -> int:
    value = args.get(key, default)
    if value is None:
        return default
    try:
        value = int(value)
    except (TypeError, ValueError):
        raise Refused(f"{key} must be a whole number, got {str(value)[:40]!r}") from None
    return max(low, min(high, value))


def tool_read(root: str, args: dict, skill_root: str = "/skill") -> str:
    path, shown = args.get("path", ""), ""
    if isinstance(path, str) and path.strip().startswith(SKILL_PREFIX):
        # The package is the agent's own (no gold in it): read with the same confinement.
        root, path, shown = os.path.realpath(skill_root), path.strip()[len(SKILL_PREFIX) :], SKILL_PREFIX
    full = resolve(root, path)
    start = _int(args, "start", 1, 1, 10**9)
    limit = _int(args, "limit", 80, 1, MAX_READ_LINES)
    out, chars, last = [], 0, start - 1
    with open(full, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if n < start:
                continue
            if n >= start + limit or chars >= MAX_READ_CHARS:
                break
            text = line.rstrip("\n").replace("\f", "\n[page break]\n")
            text = text[: MAX_READ_CHARS - chars]
            out.append(f"{n:>6}  {text}")
            chars += len(text) + 8
            last = n
    name = shown + rel(root, full)
    if not out:
        return f"{name}: no lines from line {start} (the file is shorter)"
    cut = (
        ""
        if chars < MAX_READ_CHARS
        else f" (cut at {MAX_READ_CHARS} characters; read on from line {last + 1})"
    )
    return f"{name}, lines {start}-{last}{cut}:\n" + "\n".join(out)


def tool_grep(root: str, args: dict) -> str:
    pattern = args.get("pattern")
    if not isinstance(pattern, str) or not pattern.strip() or len(pattern) > MAX_PATTERN:
        raise Refused(f"grep needs a literal pattern of 1-{MAX_PATTERN} characters")
    needle = pattern.lower()
    target = (
        resolve(root, args.get("path") or ".", want_dir=True)
        if (args.get("path") or "").strip() not in ("", ".", "docs", "docs/")
        else root
    )
    files = walk(target) if os.path.isdir(target) else iter([target])
    hits, scanned, stopped = [], 0, ""
    for full in files:
        page = 1
        with open(full, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                scanned += len(line)
                if scanned > MAX_GREP_BYTES:
                    stopped = (
                        f"\n... stopped after scanning {MAX_GREP_BYTES // (1024 * 1024)} MiB; narrow the path"
                    )
                    break
                page += line.count("\f")
                if needle in line.lower():
                    text = line.strip().replace("\f", " ")[:MAX_GREP_LINE]
                    hits.append(f"{rel(root, full)}:{n} (page {page}): {text}")
                    if len(hits) > MAX_GREP:
                        break
        if stopped or len(hits) > MAX_GREP:
            break
    if not hits:
        return f"no line contains {pattern!r} (case-insensitive)" + stopped
    more = "\n... more matches; narrow the pattern or the path" if len(hits) > MAX_GREP else ""
    return "\n".join(hits[:MAX_GREP]) + more + stopped


TOOLS = {"glob": tool_glob, "read": tool_read, "grep": tool_grep}


def main(argv: list[str]) -> int:
    if len(argv) not in (4, 5) or argv[2] not in TOOLS:
        print(f"usage: ROOT {{{','.join(TOOLS)}}} JSON-ARGS [SKILL-ROOT]", file=sys.stderr)
        return 2
    root = os.path.realpath(argv[1])
    try:
        args = json.loads(argv[3])
        if not isinstance(args, dict):
            raise Refused("the arguments must be a JSON object")
        if argv[2] == "read" and len(argv) == 5:
            print(tool_read(root, args, argv[4]))
        else:
            print(TOOLS[argv[2]](root, args))
    except Refused as exc:
        print(f"ERROR: {exc}")
    except (ValueError, OSError) as exc:
        print(f"ERROR: {type(exc).__name__}: {exc}"[:500])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
