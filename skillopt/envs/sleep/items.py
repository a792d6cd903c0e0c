"""Mined tasks: the schema ``skillopt sleep mine`` writes and this env reads, and the one function
from a raw item (one element of ``train.json`` / ``val.json`` / ``test.json``) to a task item.

Raw item (:class:`MinedItem`)::

    {"id": "sleep-3f2a9c01d4e5",              derived from the session and the reference
     "prompt": "...",                         the task as the user asked it (redacted)
     "files": {"build.sh": "..."},            working files from the session's own inputs
     "reference": {"kind": "command", "command": "sh build.sh"},
     "from_transcript": true,                 the text is untrusted data from a transcript
     "session": "claude-code:<id>", "record_sha256": "...", "miner": "rules", "rule": "..."}

The reference (:class:`Reference`) is one of four kinds:

========  =========================================================================
kind      passes when
========  =========================================================================
command   ``command`` exits 0 in the task's working folder
tests     ``command`` (a test run: pytest, npm test ...) exits 0 there
file      the file at ``path`` holds ``content`` (line ends and trailing blanks aside)
answer    the final answer equals ``answer`` after SQuAD normalisation
========  =========================================================================

A mined task with no checkable reference has ``reference: null``; mine never writes one into
the split files (it lists them in ``unchecked.json`` beside them), and :func:`item_from_raw`
refuses one, so no such task can reach the gate.

The task payload (:class:`SleepTask`) holds what the agent sees; the grading payload
(:class:`SleepGold`) holds the reference, read only by the trusted grader.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skillopt.envs.base import TaskItem
from skillopt.types import Grading, Task

__all__ = [
    "CATEGORIES",
    "MAX_FILES",
    "MAX_FILE_CHARS",
    "MinedItem",
    "Reference",
    "ReferenceKind",
    "SleepGold",
    "SleepTask",
    "item_from_raw",
    "mined_id",
    "safe_relative",
]

ReferenceKind = Literal["command", "tests", "file", "answer"]
#: The reference kinds, also the env's categories (``task_type``) in breakdown order.
CATEGORIES: tuple[str, ...] = ("command", "tests", "file", "answer")
#: Working files a task may carry: at most this many, each at most this many characters.
MAX_FILES = 20
MAX_FILE_CHARS = 20_000
_MAX_PROMPT_CHARS = 20_000
_REDACTED = "[REDACTED:"


def safe_relative(path: str) -> bool:
    """Whether ``path`` is a relative POSIX path that stays inside the working folder."""
    p = PurePosixPath(path)
    return bool(path) and not p.is_absolute() and ".." not in p.parts and "\\" not in path


class Reference(BaseModel):
    """How a mined task is checked (trusted side only; never shown to the agent).

    Attributes:
        kind: see the module docstring.
        command: the command (``command``, ``tests``), run with ``bash -lc`` in the working folder.
        path: the file (``file``), relative to the working folder.
        content: the file's expected text (``file``).
        answer: the expected final answer (``answer``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ReferenceKind
    command: str = ""
    path: str = ""
    content: str = ""
    answer: str = ""

    @model_validator(mode="after")
    def _checkable(self) -> Reference:
        need = {"command": ("command",), "tests": ("command",), "file": ("path",), "answer": ("answer",)}
        for name in need[self.kind]:
            if not getattr(self, name).strip():
                raise ValueError(f"a {self.kind} reference needs a non-empty {name!r}")
        if self.kind == "file" and not safe_relative(self.path):
            raise ValueError(f"file reference path {self.path!r} must be relative, inside the working folder")
        if _REDACTED in self.command or _REDACTED in self.path:
            raise ValueError("a reference command or path holds redacted text: it cannot be run as it was")
        return self


class MinedItem(BaseModel):
    """One mined task, as written by ``skillopt sleep mine`` (one element of a split file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    prompt: str = Field(min_length=1, max_length=_MAX_PROMPT_CHARS)
    files: dict[str, str] = {}
    reference: Reference | None
    from_transcript: bool = True
    session: str = ""
    record_sha256: str = ""
    miner: str = "rules"
    rule: str = ""
    note: str = ""

    @model_validator(mode="after")
    def _files_are_small_and_inside(self) -> MinedItem:
        if len(self.files) > MAX_FILES:
            raise ValueError(f"at most {MAX_FILES} working files, got {len(self.files)}")
        for path, text in self.files.items():
            if not safe_relative(path):
                raise ValueError(f"working file {path!r} must be a relative path inside the working folder")
            if len(text) > MAX_FILE_CHARS:
                raise ValueError(f"working file {path!r} is longer than {MAX_FILE_CHARS} characters")
        return self


def mined_id(session: str, reference: Reference | None, prompt: str) -> str:
    """A stable id: the same session, reference and prompt give the same id on every mine."""
    ref = reference.model_dump_json() if reference else "none"
    return "sleep-" + hashlib.sha256(f"{session}\n{ref}\n{prompt}".encode()).hexdigest()[:12]


class SleepTask(BaseModel):
    """``task.attributes``: what the agent sees (untrusted text from a transcript)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    prompt: str = Field(min_length=1, max_length=_MAX_PROMPT_CHARS)
    files: dict[str, str] = {}
    from_transcript: bool = True


class SleepGold(BaseModel):
    """``grading.attributes``: the reference, trusted side only (:class:`Reference`'s fields)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    kind: ReferenceKind
    command: str = ""
    path: str = ""
    content: str = ""
    answer: str = ""

    def reference(self) -> Reference:
        """As a :class:`Reference` (checked again)."""
        return Reference.model_validate(self.model_dump())


def item_from_raw(
    raw: Mapping[str, Any], *, options: Any = None, position: int = 0, source: str = ""
) -> TaskItem:
    """The task item of one mined task.

    Raises:
        ValueError: the item is malformed or has no reference (the message says which field).
    """
    item = MinedItem.model_validate(dict(raw))
    if item.reference is None:
        raise ValueError(
            f"task {item.id} has no checkable reference (reference: null); such tasks are kept out of "
            "the split files (mine lists them in unchecked.json)"
        )
    kind = item.reference.kind
    task = Task(
        id=item.id,
        instruction=item.prompt,
        attributes=SleepTask(
            prompt=item.prompt, files=item.files, from_transcript=item.from_transcript
        ).model_dump()
        | {"task_type": kind, "source_session": item.session},
    )
    grading = Grading(attributes=SleepGold(**item.reference.model_dump()).model_dump())
    return TaskItem(task=task, grading=grading, task_type=kind)
