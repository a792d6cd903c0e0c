"""OfficeQA items: the one function from a raw item (a line of ``questions.jsonl``) to a task
item, the payload models the service checks requests against, and the cited pages.

Raw item: ``{uid, question, answer, source_files, source_docs, difficulty, split}``;
``source_docs`` are FRASER URLs whose ``page=N`` is the PDF page, which is the N-th
form-feed-separated chunk of the bulletin's text in the corpus.

The corpus files a question cites travel as the task's one case ``corpus`` (file names as in
``source_files``); :func:`attach_corpus` adds them, with the cited pages rendered for the
prompt, on the controller side. ``skillopt score`` needs neither.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from skillopt.envs._qa.raw import text_field, text_list
from skillopt.envs.base import TaskItem
from skillopt.envs.officeqa.spec import OfficeQAOptions
from skillopt.types import File, Grading, Task, TestCase

__all__ = [
    "CATEGORIES",
    "CORPUS_CASE",
    "OfficeQAGold",
    "OfficeQATask",
    "attach_corpus",
    "cited_pages",
    "item_from_raw",
    "render_pages",
]

#: Per-category breakdown: the question's difficulty as upstream labels it (``hard`` = the
#: OfficeQA Pro questions), prefixed so that no category is named like a score (``hard``).
CATEGORIES = ("difficulty_easy", "difficulty_hard")
#: The task case holding the corpus files of a question.
CORPUS_CASE = "corpus"
_MONTHS = {
    m: i
    for i, m in enumerate(
        (
            "january", "february", "march", "april", "may", "june",
            "july", "august", "september", "october", "november", "december",
        ),
        1,
    )
}  # fmt: skip
_DOC = re.compile(r"/([a-z]+)-(\d{4})-\d+(?:\?|$)")
_PAGE = re.compile(r"[?&]page=(\d+)")
_FILE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


class OfficeQATask(BaseModel):
    """``task.attributes`` of an OfficeQA rollout (what the agent sees)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    question: str = Field(min_length=1, max_length=20_000)
    source_files: list[str] = Field(default_factory=list, max_length=64)
    oracle_pages: str = Field(default="", max_length=1_000_000)
    max_tool_turns: int = Field(default=24, ge=1, le=200)


class OfficeQAGold(BaseModel):
    """``grading.attributes`` (trusted side only): the answer and how to compare with it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answer: str = Field(min_length=1, max_length=2_000)
    grading: str = Field(default="normalized", pattern="^(normalized|numeric)$")
    numeric_tolerance: float = Field(default=0.0, ge=0.0, le=1.0)


def cited_pages(source_docs: Sequence[str], source_files: Sequence[str]) -> list[tuple[str, int]]:
    """``(corpus file, page)`` of each cited page, in order, without repeats.

    A URL names its bulletin by month and year (``.../january-1941-6529?page=15`` →
    ``treasury_bulletin_1941_01.txt``); a URL that names no listed file is given to the only
    source file when there is one, else skipped.
    """
    out: list[tuple[str, int]] = []
    for url in source_docs:
        page = _PAGE.search(url)
        if page is None:
            continue
        doc = _DOC.search(url.split("#", 1)[0])
        name = ""
        if doc is not None and doc.group(1) in _MONTHS:
            name = f"treasury_bulletin_{doc.group(2)}_{_MONTHS[doc.group(1)]:02d}.txt"
        if name not in source_files:
            name = source_files[0] if len(source_files) == 1 else ""
        if name and (name, int(page.group(1))) not in out:
            out.append((name, int(page.group(1))))
    return out


def render_pages(
    pages: Sequence[tuple[str, int]],
    read: Callable[[str], str],
    *,
    page_chars: int,
    total_chars: int,
) -> str:
    """The cited pages as a prompt section (each cut to ``page_chars``, all to ``total_chars``).

    ``read(name)`` returns a corpus file's text; page N is its N-th form-feed-separated chunk.
    """
    blocks: list[str] = []
    used = 0
    for name, page in pages:
        chunks = read(name).split("\f")
        if not 1 <= page <= len(chunks):
            continue
        text = chunks[page - 1].strip("\n")
        if len(text) > page_chars:
            text = text[:page_chars] + "\n...[page cut]"
        room = total_chars - used
        if room <= 200:
            break
        if len(text) > room:
            text = text[:room] + "\n...[pages cut]"
        used += len(text)
        blocks.append(f"### {name}, page {page}\n\n```text\n{text}\n```")
    return "\n\n".join(blocks)


def item_from_raw(
    raw: Mapping[str, Any], *, options: OfficeQAOptions, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one raw OfficeQA item, without its corpus (see :func:`attach_corpus`).

    Raises:
        ValueError: a field is missing or malformed (the message names it).
    """
    uid = text_field(raw, "uid", required=False) or text_field(raw, "id")
    question = text_field(raw, "question")
    answer = text_field(raw, "answer")
    files = text_list(raw, "source_files") if raw.get("source_files") else []
    for name in files:
        if not _FILE_NAME.match(name):
            raise ValueError(f"field 'source_files' holds {name[:80]!r}, not a plain file name")
    difficulty = text_field(raw, "difficulty", required=False).strip().lower()
    kind = f"difficulty_{difficulty}" if f"difficulty_{difficulty}" in CATEGORIES else CATEGORIES[1]
    payload = OfficeQATask(question=question, source_files=files, max_tool_turns=options.max_tool_turns)
    task = Task(id=uid, instruction=question, attributes=payload.model_dump() | {"task_type": kind})
    gold = OfficeQAGold(answer=answer, grading=options.grading, numeric_tolerance=options.numeric_tolerance)
    return TaskItem(task=task, grading=Grading(attributes=gold.model_dump()), task_type=kind)


def attach_corpus(
    item: TaskItem,
    raw: Mapping[str, Any],
    *,
    options: OfficeQAOptions,
    files: Mapping[str, bytes],
) -> TaskItem:
    """``item`` with its corpus files (``files``: name → bytes of every cited file) as the task's
    ``corpus`` case and, with ``oracle_pages``, the cited pages in its payload."""
    names = list(item.task.attributes.get("source_files") or ())
    attrs = dict(item.task.attributes)
    if options.oracle_pages:
        docs = text_list(raw, "source_docs") if raw.get("source_docs") else []
        attrs["oracle_pages"] = render_pages(
            cited_pages(docs, names),
            lambda name: files[name].decode("utf-8", "replace"),
            page_chars=options.page_chars,
            total_chars=options.total_page_chars,
        )
    case = TestCase(name=CORPUS_CASE, files=tuple(File(name=n, content=files[n]) for n in names))
    task = Task(id=item.task.id, instruction=item.task.instruction, attributes=attrs, cases=(case,))
    return TaskItem(task=task, grading=item.grading, task_type=item.task_type)
