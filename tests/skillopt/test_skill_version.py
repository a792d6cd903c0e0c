"""The skill version: one frozen value per version of a skill, its hashes computed once inside
it, equal when its package is, and the packed text (what the optimizer model reads and writes)
a view of it made at that edge."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from skillopt.skill.packed import PackageFrame
from skillopt.types import SkillFile, SkillVersion, skill_manifest

HEAD = "---\nname: totals\ndescription: Totals rows.\n---\n\n"
RULES = SkillFile(path="references/rules.md", data=b"# Rules\n- one\n")
HELPER = SkillFile(path="scripts/helper.py", data=b"print(1)\n", executable=True)
LOGO = SkillFile(path="assets/logo.png", data=b"\x89PNG\x00\xff")


def _version(*files: SkillFile, content: str = HEAD + "# Totals\n") -> SkillVersion:
    return SkillVersion(name="totals", content=content, files=files)


def test_its_hashes_are_the_packages_and_computed_once_inside_it() -> None:
    v = _version(HELPER, RULES)
    manifest = skill_manifest(
        hashlib.sha256(v.content.encode()).hexdigest(),
        [(f.path, hashlib.sha256(f.data).hexdigest(), f.executable) for f in (RULES, HELPER)],
    )
    assert v.tree_sha256 == hashlib.sha256(manifest).hexdigest()
    assert v.sha256 == hashlib.sha256(v.content.encode()).hexdigest()
    # Kept where it was computed: asked again, the value is the one stored, not hashed anew.
    object.__setattr__(v, "_tree_sha256", "f" * 64)
    assert v.tree_sha256 == "f" * 64


def test_files_are_kept_by_path_and_equal_packages_are_equal() -> None:
    a, b = _version(RULES, HELPER), _version(HELPER, RULES)
    assert [f.path for f in b.files] == ["references/rules.md", "scripts/helper.py"]
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != dataclasses.replace(a, name="other")  # another folder, another package
    flipped = dataclasses.replace(HELPER, executable=False)
    assert a != _version(RULES, flipped)  # a mode is part of the version
    assert a != _version(RULES, HELPER, content=HEAD + "# Totals!\n")
    assert SkillVersion(content="# x\n") == SkillVersion(content="# x\n") != SkillVersion(content="# y\n")


def test_it_is_frozen() -> None:
    v = _version(RULES)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.content = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.files[0].data = b"x"  # type: ignore[misc]
    assert isinstance(SkillVersion(files=[RULES]).files, tuple)  # type: ignore[arg-type]


def test_the_packed_text_is_a_view_that_round_trips() -> None:
    initial = _version(RULES, HELPER, LOGO)
    frame = PackageFrame.of(initial)
    text = frame.text(initial)
    assert "references/rules.md" in text and "scripts/helper.py" in text and "logo.png" not in text
    assert frame.version(text) == initial
    edited = frame.version(text.replace("- one", "- one\n- two"))
    assert edited != initial and LOGO in edited.files  # the binary file rides along unchanged
    assert frame.text(edited) == text.replace("- one", "- one\n- two")
    assert frame.version(frame.text(edited)) == edited


def test_a_one_file_skills_text_is_its_skill_md() -> None:
    v = SkillVersion(content="# Skill\n- a\n")
    frame = PackageFrame.of(v)
    assert frame.text(v) == v.content and frame.version(v.content) == v
