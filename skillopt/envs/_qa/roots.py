"""The data-root check of the question-answering envs, run when a config is resolved (stdlib
only, so resolving a config stays cheap)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["qa_data_root_problem"]


def qa_data_root_problem(root: Path, split_mode: str) -> str:
    """``""`` when ``root`` holds at least one ``.json``/``.jsonl`` split file, else what to fix."""
    if any(p.is_file() and p.suffix in (".json", ".jsonl") for p in root.iterdir()):
        return ""
    return (
        f"no .json/.jsonl split files in {root} (a question-answering data root holds one file per "
        "split, e.g. train.json, val.json, test.json)"
    )
