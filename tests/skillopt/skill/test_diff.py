"""``package_diff``: per file added/removed/changed, unified diffs for text, sizes for binary."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from skillopt.skill.diff import diff_summary, package_diff
from skillopt.types import SkillFile, SkillVersion

HEAD = "---\nname: demo\ndescription: Demo.\n---\n\n"


def spec(content: str = HEAD + "# Demo\n", **files: tuple[bytes, bool] | bytes) -> SkillVersion:
    out = []
    for key, value in sorted(files.items()):
        data, executable = value if isinstance(value, tuple) else (value, False)
        out.append(SkillFile(path=key.replace("__", "/"), data=data, executable=executable))
    return SkillVersion(name="demo", content=content, files=tuple(out))


def test_the_same_package_has_no_changes():
    a = spec(references__rules_md=b"one\n")
    assert package_diff(a, a) == [] and diff_summary([]) == "no changes"


def test_each_file_added_removed_or_changed_skill_md_first():
    a = spec(
        references__rules_md=b"one\ntwo\n", scripts__old_sh=b"echo old\n", assets__logo_bin=b"\x89PNG\x00\x01"
    )
    b = spec(
        HEAD + "# Demo\nRead references/rules.md first.\n",
        references__rules_md=b"one\nTWO\n",
        scripts__new_sh=(b"echo new\n", True),
        assets__logo_bin=b"\x89PNG\x00\x01\x02\x03",
    )
    changes = package_diff(a, b)
    assert [(c.path, c.status) for c in changes] == [
        ("SKILL.md", "changed"),
        ("assets/logo_bin", "changed"),
        ("references/rules_md", "changed"),
        ("scripts/new_sh", "added"),
        ("scripts/old_sh", "removed"),
    ]
    assert diff_summary(changes) == "3 changed, 1 added, 1 removed"
    skill, logo, rules, new, old = changes
    assert "+Read references/rules.md first.\n" in skill.diff
    assert logo.binary and logo.diff == "" and (logo.old_size, logo.new_size) == (6, 8)
    assert rules.diff == (
        "--- a/references/rules_md\n+++ b/references/rules_md\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    )
    assert (
        new.new_executable is True and new.old_size is None and new.diff.startswith("--- /dev/null\n+++ b/")
    )
    assert old.new_size is None and old.diff.startswith("--- a/scripts/old_sh\n+++ /dev/null\n")
    assert all(c.content_changed for c in changes)


def test_a_mode_change_alone_is_a_change_without_a_diff():
    a = spec(scripts__run_sh=(b"echo\n", False))
    b = spec(scripts__run_sh=(b"echo\n", True))
    (c,) = package_diff(a, b)
    assert c.status == "changed" and c.mode_changed and not c.content_changed and c.diff == ""
    assert c.to_json()["new_executable"] is True


def test_a_missing_final_newline_shows():
    (c,) = package_diff(spec(references__a_md=b"x\n"), spec(references__a_md=b"x"))
    assert c.diff.endswith("-x\n+x\n\\ No newline at end of file\n")


texts = st.text(alphabet="ab\n", max_size=30)


@given(a=texts, b=texts)
@settings(max_examples=100, deadline=None)
def test_gnu_patch_turns_a_into_b_with_our_diff(a, b):
    changes = package_diff(spec(references__f_md=a.encode()), spec(references__f_md=b.encode()))
    if a == b:
        assert changes == []
        return
    (c,) = changes
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "f.md"
        target.write_text(a)
        res = subprocess.run(
            ["patch", "--quiet", "--force", str(target)], input=c.diff, capture_output=True, text=True
        )
        assert res.returncode == 0, (res.stdout, res.stderr, c.diff)
        assert target.read_text() == b


@given(
    a=st.dictionaries(st.sampled_from(["x", "y", "z", "w"]), st.binary(max_size=8), max_size=4),
    b=st.dictionaries(st.sampled_from(["x", "y", "z", "w"]), st.binary(max_size=8), max_size=4),
)
@settings(max_examples=200, deadline=None)
def test_statuses_follow_the_file_sets(a, b):
    sa = spec(**{f"assets__{k}": v for k, v in a.items()})
    sb = spec(**{f"assets__{k}": v for k, v in b.items()})
    got = {c.path.removeprefix("assets/"): c.status for c in package_diff(sa, sb)}
    want = {k: "added" for k in b.keys() - a.keys()}
    want |= {k: "removed" for k in a.keys() - b.keys()}
    want |= {k: "changed" for k in a.keys() & b.keys() if a[k] != b[k]}
    assert got == want
