#!/usr/bin/env python3
"""Re-create the vendored samples of the question-answering envs from the shared datasets.

    python scripts/vendor_qa_samples.py [--shared ../shared/datasets]

Writes ``skillopt/envs/<env>/data/sample/{train,val,test}.<json|jsonl>``: small slices of the
real releases, items copied byte-for-byte as JSON values (same fields, same order). OfficeQA's
sample is a data root of its own layout: the 8 questions of :data:`OFFICEQA` (upstream gates its
answers: the project commits at most 8), our demo split of them (``splits.json``), the bulletins
they cite (``corpus/``) and the upstream licence texts. The README beside each sample is written
by hand and is left alone.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# env -> split -> (source file, first item, item count); the suffix of the source is kept.
PLAN = {
    "searchqa": {"train": ("train.json", 0, 20), "val": ("val.json", 0, 15), "test": ("val.json", 15, 15)},
    "livemathematicianbench": {
        "train": ("train.json", 0, 12),
        "val": ("val.json", 0, 8),
        "test": ("test.json", 0, 10),
    },
    "gsm8k": {"train": ("train.jsonl", 0, 20), "val": ("train.jsonl", 20, 15), "test": ("test.jsonl", 0, 15)},
    "math500": {
        "train": ("test.jsonl", 0, 20),
        "val": ("test.jsonl", 20, 15),
        "test": ("test.jsonl", 35, 15),
    },
    "hotpotqa": {"train": ("dev.jsonl", 0, 16), "val": ("dev.jsonl", 16, 12), "test": ("test.jsonl", 0, 12)},
}


#: OfficeQA's sample: uid -> the demo split it is in (not SkillOpt's split: see its README).
OFFICEQA = {
    "UID0152": "train",
    "UID0044": "train",
    "UID0048": "train",
    "UID0199": "train",
    "UID0001": "val",
    "UID0220": "val",
    "UID0128": "test",
    "UID0023": "test",
}


def vendor_officeqa(shared: Path) -> None:
    """Write OfficeQA's sample data root (see the module docstring)."""
    src = shared / "officeqa"
    out = REPO / "skillopt" / "envs" / "officeqa" / "data" / "sample"
    (out / "corpus").mkdir(parents=True, exist_ok=True)
    items = {x["uid"]: x for x in read(src / "questions.jsonl")}
    chosen = [items[uid] for uid in OFFICEQA]
    (out / "questions.jsonl").write_text(
        "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in chosen), encoding="utf-8"
    )
    splits = {name: [u for u, s in OFFICEQA.items() if s == name] for name in ("train", "val", "test")}
    (out / "splits.json").write_text(json.dumps(splits, indent=1) + "\n", encoding="utf-8")
    for name in sorted({f for x in chosen for f in x["source_files"]}):
        (out / "corpus" / name).write_bytes((src / "corpus" / name).read_bytes())
    for name in ("LICENSE-CC-BY-SA", "NOTICE"):
        (out / name).write_bytes((src / name).read_bytes())
    print(f"{out.relative_to(REPO)}: {len(chosen)} questions from {src}")


def read(path: Path) -> list:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return json.loads(path.read_text(encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shared", default=str(REPO.parent / "shared" / "datasets"))
    args = parser.parse_args()
    shared = Path(args.shared)
    for env, splits in PLAN.items():
        out = REPO / "skillopt" / "envs" / env / "data" / "sample"
        out.mkdir(parents=True, exist_ok=True)
        for split, (source, first, count) in splits.items():
            src = shared / env / source
            items = read(src)[first : first + count]
            target = out / f"{split}{src.suffix}"
            if src.suffix == ".jsonl":
                target.write_text(
                    "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in items), encoding="utf-8"
                )
            else:
                target.write_text(json.dumps(items, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            print(f"{target.relative_to(REPO)}: {len(items)} items from {src}")
    vendor_officeqa(shared)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
