"""Prompt caching: the cacheable prefix share of real runs and what their input would bill.

Run: ``python bench/bench_prompt_cache.py [--skill-tokens 3000]``.

Three offline runs through the embedded sandbox (real containers, the scripted model server,
which caches prompt prefixes the way OpenAI does and reports ``cached_tokens``):

* ``spreadsheetbench_multi``: ``skillopt train --config spreadsheetbench_demo`` with the
  multi-turn codegen agent (``env.agent=codegen_multi``);
* ``searchqa``: ``skillopt train --config searchqa_demo`` (single-turn; its seed skill is
  43 tokens, so the repeated system part is small beside each question's snippets);
* ``searchqa_skill_<N>_tokens``: ``skillopt eval`` of the SearchQA demo's items with a skill of
  about N tokens (``--skill-tokens N ...``) (the seed skill, then its own rules repeated as filler up to
  that length: only the length matters here), as skills grow to in real runs.

Per run: ``cacheable_prefix_share`` (summary.json / eval_summary.json; overall and per role);
the input tokens the provider reported as cached; and the *billed-equivalent* input (uncached
tokens at full price, cached reads at a discount, cache writes at a premium) as a ratio of the
same input uncached, at three discounts: 0.1 (OpenAI's GPT-5 family and Anthropic cache reads),
0.25 (GPT-4.1), 0.5 (GPT-4o); cache writes at 1.25 (Anthropic's 5-minute cache).

Prints one JSON object keyed by run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEARCHQA_SKILL = ROOT / "skillopt/envs/searchqa/skills/initial.md"
DISCOUNTS = (0.1, 0.25, 0.5)
WRITE_PREMIUM = 1.25


def skillopt(*args: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": ""},
    )
    if proc.returncode != 0:
        raise SystemExit(f"skillopt {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def billed(usages: list[dict]) -> dict:
    prompt = sum(u.get("prompt_tokens", 0) for u in usages)
    cached = sum(u.get("cached_input_tokens", 0) for u in usages)
    written = sum(u.get("cache_write_input_tokens", 0) for u in usages)
    plain = prompt - cached - written
    return {
        "input_tokens": prompt,
        "cached_input_tokens": cached,
        "cached_fraction": round(cached / prompt, 4) if prompt else None,
        **{
            f"billed_ratio_at_{d:g}": round((plain + d * cached + WRITE_PREMIUM * written) / prompt, 4)
            for d in DISCOUNTS
            if prompt
        },
    }


def from_summary(path: Path, usages: dict[str, list[dict]], seconds: float) -> dict:
    s = json.loads(path.read_text())
    return {
        "cacheable_prefix_share": s.get("cacheable_prefix_share"),
        "cacheable_prefix": s.get("cacheable_prefix"),
        **{f"{role}_provider": billed(u) for role, u in usages.items() if u},
        "seconds": round(seconds, 1),
    }


def train_run(tmp: Path, name: str, *args: str) -> dict:
    out = tmp / name
    t0 = time.monotonic()
    skillopt("train", *args, "--out", str(out))
    s = json.loads((out / "summary.json").read_text())
    tokens = s["token_summary"]
    return from_summary(
        out / "summary.json",
        {
            "target": list(tokens.get("target", {}).values()),
            "run": [*tokens.get("target", {}).values(), *tokens.get("optimizer", {}).values()],
        },
        time.monotonic() - t0,
    )


def grown_skill(tokens: int) -> str:
    seed = SEARCHQA_SKILL.read_text()
    rules = [line for line in seed.splitlines() if line.startswith("- ")] or [seed]
    parts = [seed.rstrip(), "", "## More of the same rules (filler: only the length matters here)"]
    i = 0
    while len("\n".join(parts)) < tokens * 4:
        parts.append(rules[i % len(rules)])
        i += 1
    return "\n".join(parts) + "\n"


def eval_run(tmp: Path, tokens: int) -> dict:
    skill = tmp / f"skill_{tokens}.md"
    skill.write_text(grown_skill(tokens))
    out = tmp / f"searchqa_skill_{tokens}"
    t0 = time.monotonic()
    skillopt(
        "eval", "--config", "searchqa_demo", "--skill", str(skill), "--split", "all",
        "--out", str(out), "--simulate", "on",
    )  # fmt: skip
    usages = [
        json.loads(line).get("usage") or {}
        for path in out.rglob("results.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    result = from_summary(out / "eval_summary.json", {"target": usages}, time.monotonic() - t0)
    result["skill_chars"] = len(skill.read_text())
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--skill-tokens", type=int, nargs="+", default=[3000], help="sizes of the grown SearchQA skill"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp_s:
        tmp = Path(tmp_s)
        out = {
            "spreadsheetbench_multi": train_run(
                tmp, "sb_multi", "--config", "spreadsheetbench_demo", "--set", "env.agent=codegen_multi"
            ),
            "searchqa": train_run(tmp, "searchqa", "--config", "searchqa_demo"),
            **{f"searchqa_skill_{n}_tokens": eval_run(tmp, n) for n in args.skill_tokens},
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
