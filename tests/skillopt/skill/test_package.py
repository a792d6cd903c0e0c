"""Agent Skills packages on disk and in memory: every rule of issue 33 item 7 refused with a
message naming the file and the rule, reading that stays cheap on hostile folders, round
trips that keep bytes, executable bits and the tree hash, and the standard's own validator
(the ``agentskills`` CLI of PyPI ``skills-ref``) passing on what we write."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from skills_ref.validator import validate as standard_validate

from skillopt.errors import SkillError
from skillopt.skill.package import (
    SKILL_MD,
    PackageLimits,
    PackageProblem,
    SkillPackageError,
    as_package,
    check_package,
    file_index,
    front_matter,
    load_skill,
    package_problems,
    read_skill,
    write_package,
)
from skillopt.types import SkillFile, SkillVersion

AGENTSKILLS = Path(sys.executable).parent / "agentskills"  # skills-ref's CLI
MiB = 1024 * 1024


def skill_md(
    name: str = "demo", description: str = "Demo skill, reads a rule and runs a script.", extra: str = ""
) -> str:
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n# Demo\nRead references/rules.md.\n"


def make_package(
    parent: Path, name: str = "demo", files: dict[str, bytes] | None = None, *, text: str | None = None
) -> Path:
    """A package folder ``parent/name`` with SKILL.md (``text``) and ``files``."""
    root = parent / name
    root.mkdir(parents=True)
    (root / SKILL_MD).write_text(skill_md(name) if text is None else text, encoding="utf-8")
    for rel, data in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def problems_of(path: Path, **kw) -> list[PackageProblem]:
    with pytest.raises(SkillPackageError) as info:
        load_skill(path, **kw)
    assert str(path) in str(info.value)
    return list(info.value.problems)


def only(problems: list[PackageProblem], rule: str) -> PackageProblem:
    found = [p for p in problems if p.rule == rule]
    assert len(found) == 1, problems
    return found[0]


def bytes_read() -> int:
    """Bytes this process has read through read(2) and friends so far (``rchar``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def standard_cli(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(AGENTSKILLS), "validate", str(folder)], capture_output=True, text=True)


DEMO_FILES = {
    "references/rules.md": b"# Rules\nTotals go in column F.\n",
    "scripts/check.py": b"#!/usr/bin/env python3\nprint('ok')\n",
    "assets/template.bin": bytes(range(256)),
}


# ── every rule refused, naming the file and the rule ─────────────────────────────────────


def test_a_symlink_to_etc_passwd_is_refused_and_never_read(tmp_path):
    root = make_package(tmp_path, files={"references/rules.md": b"ok\n"})
    (root / "references" / "passwd").symlink_to("/etc/passwd")
    (root / "scripts").symlink_to("/etc")  # a linked folder is not walked either
    problems = problems_of(root)
    linked = {p.path: p for p in problems if p.rule == "symlink"}
    assert set(linked) == {"references/passwd", "scripts"}
    assert "/etc/passwd" in linked["references/passwd"].message
    assert str(linked["references/passwd"]) == (
        "references/passwd: symlinks are not allowed (-> /etc/passwd) [symlink]"
    )
    spec, _ = read_skill(root)
    assert [f.path for f in spec.files] == ["references/rules.md"]
    assert all(b"root:" not in f.data for f in spec.files)


def test_a_parent_or_absolute_path_is_refused_and_nothing_is_written(tmp_path):
    for path, rule in (
        ("../evil.sh", "parent-path"),
        ("scripts/../../evil.sh", "parent-path"),
        ("/etc/cron.d/x", "absolute-path"),
    ):
        spec = SkillVersion(name="demo", content=skill_md(), files=(SkillFile(path=path, data=b"x"),))
        problem = only(package_problems(spec), rule)
        assert problem.path == path
        with pytest.raises(SkillPackageError) as info:
            check_package(spec)
        assert f"{path}: " in str(info.value) and f"[{rule}]" in str(info.value)
        out = tmp_path / "out"
        with pytest.raises(SkillPackageError):
            write_package(spec, out)
        assert not out.exists() and not (tmp_path / "evil.sh").exists()


def test_a_folder_name_that_would_escape_is_refused_by_write(tmp_path):
    for name in ("../up", "a/b", "Has Caps", ""):
        with pytest.raises(SkillPackageError) as info:
            write_package(SkillVersion(name=name, content=skill_md()), tmp_path / "out")
        assert info.value.problems[0].rule == "name"
    assert not (tmp_path / "out").exists() and not (tmp_path / "up").exists()


def test_a_50_mib_asset_is_refused_without_being_read(tmp_path):
    root = make_package(tmp_path, files={"references/rules.md": b"ok\n"})
    (root / "assets").mkdir()
    with open(root / "assets" / "huge.bin", "wb") as fh:
        fh.truncate(50 * MiB)  # sparse: costs no disk
    before = bytes_read()
    problem = only(problems_of(root), "too-large")
    assert bytes_read() - before < 1 * MiB
    assert problem.path == "assets/huge.bin"
    assert f"more than the {8 * MiB} allowed" in problem.message and str(50 * MiB) in problem.message


def test_a_lone_skill_md_over_the_limit_is_refused_without_being_read(tmp_path):
    big = tmp_path / "SKILL.md"
    with open(big, "wb") as fh:
        fh.truncate(50 * MiB)
    before = bytes_read()
    problem = only(problems_of(big), "too-large")
    assert bytes_read() - before < 1 * MiB
    assert problem.path == "SKILL.md"


def test_ten_thousand_files_are_refused_after_reading_a_few(tmp_path):
    root = make_package(tmp_path)
    many = root / "references"
    many.mkdir()
    chunk = b"x" * 1024
    for i in range(10_000):
        (many / f"r{i:05d}.md").write_bytes(chunk)
    before = bytes_read()
    problem = only(problems_of(root), "too-many-files")
    read = bytes_read() - before
    assert read < 1 * MiB, f"read {read} bytes of a 10 MiB folder"
    assert "more than the 200 files allowed" in problem.message and "references/r00199.md" in problem.message


def test_a_non_utf8_reference_is_refused_but_binary_assets_are_fine(tmp_path):
    root = make_package(
        tmp_path,
        files={"references/latin1.md": "café\n".encode("latin-1"), "assets/logo.bin": b"\xff\xfe\x00"},
    )
    problem = only(problems_of(root), "utf-8")
    assert problem.path == "references/latin1.md"
    assert "byte 3" in problem.message and "assets/" in problem.message


def test_a_name_that_differs_from_its_folder_is_refused(tmp_path):
    root = make_package(tmp_path, "other", text=skill_md("demo"))
    problem = only(problems_of(root), "name-folder")
    assert problem.path == SKILL_MD
    assert "'demo'" in problem.message and "'other'" in problem.message
    assert standard_cli(root).returncode == 1  # the standard agrees


def test_front_matter_that_is_not_yaml_is_refused(tmp_path):
    root = make_package(tmp_path, text="---\nname: demo\ndescription: [never closed\n---\nbody\n")
    problem = only(problems_of(root), "front-matter")
    assert problem.path == SKILL_MD and "Invalid YAML" in problem.message
    assert "\n" not in problem.message  # one line per problem


def test_fields_outside_the_standard_are_refused(tmp_path):
    root = make_package(tmp_path, text=skill_md(extra="version: 2\nauthor: me\n"))
    problem = only(problems_of(root), "fields")
    assert problem.path == SKILL_MD and "author, version" in problem.message
    # metadata is where such fields belong
    fine = make_package(tmp_path / "ok", text=skill_md(extra="metadata:\n  version: '2'\n  author: me\n"))
    assert load_skill(fine).name == "demo"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (skill_md("Demo"), "name"),
        (skill_md("de--mo"), "name"),
        (skill_md("-demo"), "name"),
        (skill_md("démo"), "name"),  # the standard allows Unicode letters; we keep names ASCII
        ("---\ndescription: no name\n---\nbody\n", "name"),
        ("---\nname: demo\n---\nbody\n", "description"),
        (skill_md(description="x" * 1025), "description"),
        (skill_md(extra=f"compatibility: {'y' * 501}\n"), "compatibility"),
        ("# Demo\nno front matter at all\n", "front-matter"),
    ],
)
def test_the_standards_rules_each_have_a_rule_id(tmp_path, text, rule):
    root = make_package(tmp_path, text=text, files={"references/a.md": b"a\n"})
    problem = only(problems_of(root), rule)
    assert problem.path == SKILL_MD


def test_every_problem_is_listed_not_only_the_first(tmp_path):
    root = make_package(
        tmp_path,
        "other",
        text=skill_md("demo", extra="version: 2\n"),
        files={"references/latin1.md": b"\xe9\n"},
    )
    (root / "scripts").mkdir()
    (root / "scripts" / "run.sh").symlink_to("/bin/sh")
    os.mkfifo(root / "assets.fifo")
    rules = {(p.path, p.rule) for p in problems_of(root)}
    assert rules == {
        ("SKILL.md", "fields"),
        ("SKILL.md", "name-folder"),
        ("references/latin1.md", "utf-8"),
        ("scripts/run.sh", "symlink"),
        ("assets.fifo", "special-file"),
    }


def test_a_folder_without_skill_md_or_that_is_nothing_at_all(tmp_path):
    root = tmp_path / "demo"
    root.mkdir()
    (root / "skill.md").write_text(skill_md())
    problem = only(problems_of(root), "missing")
    assert "skill.md" in problem.message
    version = tmp_path / "v0003"  # a run's skill_packages/v0003/ holds the package demo/
    (version / "demo").mkdir(parents=True)
    (version / "demo" / "SKILL.md").write_text(skill_md())
    problem = only(problems_of(version), "missing")
    assert f"one folder deeper: give {version / 'demo'}" in problem.message
    with pytest.raises(SkillError, match="cannot read the skill"):
        load_skill(tmp_path / "absent")


def test_paths_that_cannot_coexist_on_disk_are_refused():
    spec = SkillVersion(
        name="demo",
        content=skill_md(),
        files=(
            SkillFile(path="scripts", data=b"a file\n"),
            SkillFile(path="scripts/run.sh", data=b"echo\n"),
            SkillFile(path="references/a.md", data=b"1\n"),
            SkillFile(path="references/a.md", data=b"2\n"),
            SkillFile(path="SKILL.md/x", data=b"x\n"),
        ),
    )
    rules = {(p.path, p.rule) for p in package_problems(spec)}
    assert rules == {
        ("scripts/run.sh", "path-conflict"),
        ("references/a.md", "duplicate"),
        ("SKILL.md/x", "path-conflict"),
    }


def test_a_file_name_with_a_newline_cannot_forge_the_manifest(tmp_path):
    """``a\n<sha> 644 b`` as one path would read, in the manifest, as two files."""
    b = SkillFile(path="b", data=b"x\n")
    forged = SkillFile(path=f"a\n{b.sha256} 644 b", data=b"")
    spec = SkillVersion(name="demo", content=skill_md(), files=(forged,))
    problem = only(package_problems(spec), "path")
    assert "control characters" in problem.message
    with pytest.raises(SkillPackageError):
        write_package(spec, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_limits_are_configurable(tmp_path):
    root = make_package(tmp_path, files=DEMO_FILES)
    assert load_skill(root).name == "demo"
    assert only(problems_of(root, limits=PackageLimits(max_files=3)), "too-many-files")
    assert only(problems_of(root, limits=PackageLimits(max_bytes=300)), "too-large")
    spec = load_skill(root)
    assert only(package_problems(spec, PackageLimits(max_files=3)), "too-many-files").path == ""
    assert (
        only(package_problems(spec, PackageLimits(max_bytes=300)), "too-large").path == "assets/template.bin"
    )


# ── reading and writing ───────────────────────────────────────────────────────────────────


def test_load_write_load_keeps_bytes_and_executable_bits(tmp_path):
    root = make_package(tmp_path / "src", files=DEMO_FILES)
    (root / "scripts" / "check.py").chmod(0o755)
    first = load_skill(root)
    assert [(f.path, f.executable) for f in first.files] == [
        ("assets/template.bin", False),
        ("references/rules.md", False),
        ("scripts/check.py", True),
    ]
    out = write_package(first, tmp_path / "out")
    assert out == tmp_path / "out" / "demo"
    assert os.stat(out / "scripts" / "check.py").st_mode & 0o777 == 0o755
    assert os.stat(out / "references" / "rules.md").st_mode & 0o777 == 0o644
    again = load_skill(out)
    assert again == first and again.tree_sha256 == first.tree_sha256
    # Written again over itself: the same tree, no leftovers beside it.
    write_package(again, tmp_path / "out")
    assert load_skill(out).tree_sha256 == first.tree_sha256
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["demo"]


def test_the_tree_hash_names_content_and_modes_not_order():
    files = tuple(
        SkillFile(path=p, data=d, executable=p.startswith("scripts/")) for p, d in DEMO_FILES.items()
    )
    a = SkillVersion(name="demo", content=skill_md(), files=files)
    b = SkillVersion(name="demo", content=skill_md(), files=tuple(reversed(files)))
    assert a.tree_sha256 == b.tree_sha256 and a.manifest() == b.manifest()
    flipped = tuple(SkillFile(path=f.path, data=f.data, executable=not f.executable) for f in files)
    assert SkillVersion(name="demo", content=skill_md(), files=flipped).tree_sha256 != a.tree_sha256
    assert SkillVersion(name="demo", content=skill_md() + " ", files=files).tree_sha256 != a.tree_sha256


def test_a_one_file_skill_without_front_matter_is_written_as_a_valid_package(tmp_path):
    text = "# Spreadsheet rules --- the short version\n\nAlways write totals to column F.\n"
    lone = tmp_path / "SKILL.md"
    lone.write_text(text)
    spec = load_skill(lone)
    assert spec.name == "skillopt-target" and spec.content == text and front_matter(spec.content)[0] is None
    out = write_package(spec, tmp_path / "out")
    fields, body = front_matter((out / SKILL_MD).read_text())
    assert fields == {"name": "skillopt-target", "description": "Spreadsheet rules - the short version"}
    assert body == text.strip()
    assert load_skill(out) == as_package(spec)
    assert standard_validate(out) == []
    res = standard_cli(out)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_standards_validator_passes_on_every_package_we_write(tmp_path):
    written = [
        write_package(load_skill(make_package(tmp_path / "a", files=DEMO_FILES)), tmp_path / "w1"),
        write_package(SkillVersion(name="one-file", content="Just a line.\n"), tmp_path / "w2"),
        write_package(SkillVersion(name="empty", content=""), tmp_path / "w3"),
    ]
    for folder in written:
        assert load_skill(folder).name == folder.name
        res = standard_cli(folder)
        assert res.returncode == 0 and "Valid skill" in res.stdout, res.stdout + res.stderr


def test_write_replaces_a_symlinked_install_not_its_target(tmp_path):
    elsewhere = make_package(tmp_path / "elsewhere", files={"references/old.md": b"old\n"})
    parent = tmp_path / "skills"
    parent.mkdir()
    (parent / "demo").symlink_to(elsewhere)
    assert load_skill(parent / "demo").name == "demo"  # the path given may be a link
    write_package(SkillVersion(name="demo", content=skill_md()), parent)
    assert not (parent / "demo").is_symlink() and load_skill(parent / "demo").files == ()
    assert (elsewhere / "references" / "old.md").read_bytes() == b"old\n"


def test_the_folder_name_comes_from_the_path_as_given(tmp_path, monkeypatch):
    root = make_package(tmp_path, files=DEMO_FILES)
    monkeypatch.chdir(root)
    assert load_skill(Path(".")).name == "demo"
    monkeypatch.chdir(root / "references")
    assert load_skill(Path("..")).name == "demo"


def test_the_file_index_lists_files_never_their_contents():
    spec = SkillVersion(
        name="demo",
        content=skill_md(),
        files=tuple(
            SkillFile(path=p, data=d, executable=p.endswith(".py")) for p, d in sorted(DEMO_FILES.items())
        ),
    )
    index = file_index(spec)
    assert index.splitlines() == [
        "- `/skill/assets/template.bin` (256 B)",
        "- `/skill/references/rules.md` (31 B): # Rules",
        f"- `/skill/scripts/check.py` ({len(DEMO_FILES['scripts/check.py'])} B, executable): print('ok')",
    ]
    assert file_index(SkillVersion(content="x")) == ""


# ── properties ────────────────────────────────────────────────────────────────────────────

names = st.from_regex(r"[a-z0-9]{1,8}(-[a-z0-9]{1,8}){0,2}", fullmatch=True)
segments = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,11}", fullmatch=True).filter(
    lambda s: s not in (".", "..")
)


@st.composite
def package_files(draw) -> tuple[SkillFile, ...]:
    out: dict[str, SkillFile] = {}
    for _ in range(draw(st.integers(0, 6))):
        top = draw(st.sampled_from(["scripts", "references", "assets"]))
        path = "/".join([top, *draw(st.lists(segments, min_size=1, max_size=3))])
        data = (
            draw(st.binary(max_size=200)) if top == "assets" else draw(st.text(max_size=200)).encode("utf-8")
        )
        out[path] = SkillFile(path=path, data=data, executable=draw(st.booleans()))
    return tuple(out.values())


@given(name=names, files=package_files(), body=st.text(max_size=300))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_valid_package_round_trips_through_disk(name, files, body):
    spec = SkillVersion(name=name, content=skill_md(name) + body, files=files)
    assume(not package_problems(spec))
    with tempfile.TemporaryDirectory() as tmp:
        out = write_package(spec, Path(tmp))
        back = load_skill(out)
        assert back.content == spec.content
        assert back.files == tuple(sorted(files, key=lambda f: f.path))
        assert back.tree_sha256 == spec.tree_sha256
        assert standard_validate(out) == []


@given(name=names, body=st.text(max_size=400).filter(lambda t: not t.startswith("---")))
@settings(max_examples=150, deadline=None)
def test_any_one_file_skill_becomes_a_valid_package(name, body):
    spec = as_package(SkillVersion(name=name, content=body))
    assert package_problems(spec) == []
    fields, rest = front_matter(spec.content)
    assert fields is not None and fields["name"] == name and 1 <= len(fields["description"]) <= 200
    assert rest == body.strip()
    with tempfile.TemporaryDirectory() as tmp:
        out = write_package(spec, Path(tmp))
        assert standard_validate(out) == []
        assert load_skill(out) == spec


@pytest.mark.parametrize("name", ["123", "yes", "null", "0x1f", "on"])
def test_a_synthesized_front_matter_quotes_names_other_parsers_would_not_read_as_text(name):
    import yaml  # PyYAML reads YAML 1.1 as the harnesses' parsers do: booleans, numbers, null

    head = as_package(SkillVersion(name=name, content="Body.\n")).content.split("---")[1]
    assert yaml.safe_load(head)["name"] == name
    assert front_matter(as_package(SkillVersion(name=name, content="Body.\n")).content)[0]["name"] == name


@given(text=st.text(max_size=200) | st.text(alphabet=st.characters(max_codepoint=0x9F), max_size=60))
@example(text="\nname: a\x00b\n---\n")  # strictyaml fails with AttributeError on its own error
@example(text="\nname: demo\ndescription: \ud800\n---\n")
@settings(max_examples=200, deadline=None)
def test_front_matter_raises_nothing_but_a_package_error(text):
    try:
        fields, _ = front_matter("---" + text)
    except SkillPackageError as exc:
        assert exc.problems[0].rule == "front-matter" and exc.problems[0].path == SKILL_MD
    else:
        assert isinstance(fields, dict)
        package_problems(SkillVersion(name="demo", content="---" + text))  # never raises


KNOWN_RULES = {
    "front-matter", "fields", "name", "description", "compatibility", "name-folder", "path",
    "absolute-path", "parent-path", "path-conflict", "duplicate", "utf-8", "too-many-files",
    "too-large", "symlink", "special-file", "missing", "unreadable", "standard",
}  # fmt: skip


@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(["file", "binary", "exec", "link", "fifo"]),
            st.sampled_from(["scripts", "references", "assets", "."]),
            segments,
        ),
        max_size=8,
    ),
    max_files=st.integers(1, 6),
    max_bytes=st.integers(1, 400),
    with_skill_md=st.booleans(),
)
@settings(max_examples=80, deadline=None)
def test_reading_any_folder_gives_a_spec_and_named_problems_never_a_crash(
    entries, max_files, max_bytes, with_skill_md
):
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "demo"
        root.mkdir()
        if with_skill_md:
            (root / SKILL_MD).write_text(skill_md())
        for kind, folder, name in entries:
            target = root / folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists() or target.is_symlink() or target.name == SKILL_MD:
                continue
            if kind == "link":
                target.symlink_to("/etc/passwd")
            elif kind == "fifo":
                os.mkfifo(target)
            else:
                target.write_bytes(b"\xff\xfe\x00" * 10 if kind == "binary" else b"text\n" * 10)
                target.chmod(0o755 if kind == "exec" else 0o644)
        limits = PackageLimits(max_files=max_files, max_bytes=max_bytes)
        spec, problems = read_skill(root, limits=limits)
        assert {p.rule for p in problems} <= KNOWN_RULES - {"standard"}
        on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*")}
        assert all(p.path in on_disk or p.path == "" or p.path == SKILL_MD for p in problems), problems
        assert all(f.path in on_disk for f in spec.files)
        assert not any(p.rule == "symlink" for p in problems) or all(
            b"root:" not in f.data for f in spec.files
        )
        if not problems:
            assert load_skill(root, limits=limits) == spec
