"""OfficeQA without Docker: the evaluator (hand-checked items, and the numeric reading against
upstream's own reward.py on the shared questions), the items and cited pages, the data root,
and the corpus tools' confinement (the program the container runs, run here on a temp dir)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from skillopt.agents.corpus_tools import program_source
from skillopt.envs._qa.data import QADataError, read_items
from skillopt.envs.officeqa.data import SAMPLE_ROOT, OfficeQAData
from skillopt.envs.officeqa.evaluator import grade, normalize, numeric_match
from skillopt.envs.officeqa.items import attach_corpus, cited_pages, item_from_raw, render_pages
from skillopt.envs.officeqa.spec import OfficeQAOptions
from skillopt.testing.shared_data import shared_datasets


def shared_root() -> Path:
    root = shared_datasets()
    if root is None or not (Path(root) / "officeqa").is_dir():
        pytest.fail("the shared OfficeQA data are missing: set SKILLOPT_SHARED_DATASETS", pytrace=False)
    return Path(root) / "officeqa"


# -- grading -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gold", "reply", "em", "numeric"),
    [
        ("2,602", "<answer>2,602</answer>", 1, 1),
        ("2,602", "<answer>2602</answer>", 1, 1),  # commas dropped
        ("2,602", "<answer>2602.0</answer>", 0, 1),
        ("2,602", "<answer>$2,602 million</answer>", 1, 1),  # '$' and 'million' dropped / compatible
        ("2,602", "<answer>2602000000</answer>", 0, 0),  # units are not converted
        ("2,602", "<answer>2,603</answer>", 0, 0),
        ("2,602", "<answer>The answer is 2,602</answer>", 0, 1),
        ("12.5%", "<answer>12.5%</answer>", 1, 1),
        ("12.5%", "<answer>12.5</answer>", 0, 1),  # the percent sign is ignored numerically
        ("3%", "<answer>0.03</answer>", 0, 0),
        ("-11", "<answer>-11</answer>", 1, 1),
        ("-11", "<answer>(11)</answer>", 0, 1),  # accounting parentheses are negative
        ("-11", "<answer>\u221211</answer>", 0, 1),  # the Unicode minus
        ("-11", "<answer>11</answer>", 0, 0),
        ("1169.41 million", "<answer>1,169.41</answer>", 1, 1),
        # SkillOpt's normalisation drops unit words (EM 1); the numeric reading refuses them.
        ("1169.41 million", "<answer>1,169.41 billion</answer>", 1, 0),
        ("$140.9 Billion", "<answer>140.9</answer>", 1, 1),
        ("March 1977", "<answer>march 1977</answer>", 1, 1),
        ("March 1977", "<answer>April 1977</answer>", 0, 0),
        ("Federal Old-Age Trust Fund (OASI)", "<answer>federal old-age trust fund</answer>", 0, 1),
        ("2,602", "Work...\n<FINAL_ANSWER>2,602</FINAL_ANSWER>", 1, 1),  # upstream's tag
        ("2,602", "<answer>2,602\n2,603</answer>", 0, 0),  # not one line
        ("2,602", "<answer>Unable to determine</answer>", 0, 0),
    ],
)
def test_hand_checked_answers(gold, reply, em, numeric):
    normal = grade(reply, gold)
    assert (normal.metrics["em"], normal.metrics["numeric"]) == (em, numeric), normal.report
    assert normal.hard == em and normal.soft >= normal.hard
    by_number = grade(reply, gold, mode="numeric")
    assert by_number.hard == numeric and by_number.soft >= by_number.hard
    assert (by_number.fail_reason == "") == bool(numeric)
    assert "[EVALUATION RESULT]" in by_number.report and gold in by_number.report


def test_normalisation_and_tolerance():
    assert normalize("  $2,602 Million Nominal Dollars! ") == "2602"
    assert normalize("12.5% (approx.)") == "12.5% approx."
    assert numeric_match("2,602", "2,603", 0.01)[0] and not numeric_match("2,602", "2,700", 0.01)[0]
    assert numeric_match("0", "0")[0] and not numeric_match("0", "0.1", 0.5)[0]
    assert numeric_match("1940", "1940")[0]  # a year-like gold keeps years
    with pytest.raises(ValueError, match="tolerance"):
        numeric_match("1", "1", 2.0)


def _reference_reward():
    spec = importlib.util.spec_from_file_location("officeqa_reward", shared_root() / "reference_reward.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _variants(gold: str) -> list[str]:
    digits = "".join(c for c in gold if c.isdigit())
    bumped = gold.replace(digits[-1], str((int(digits[-1]) + 1) % 10)) if digits else gold + "x"
    return [
        gold,
        gold.replace(",", ""),
        f"The answer is {gold}",
        f"{gold} million",
        f"${gold} billion",
        gold.rstrip("%"),
        f"-{gold}",
        f"({gold})",
        bumped,
        f"{gold} in 1999",
        f"{gold}\nsecond line",
        gold.upper(),
        f"<b>{gold}</b>",
    ]


def test_the_numeric_reading_agrees_with_upstream_reward_py():
    """Every shared gold (without upstream's bracketed lists) x 13 reply variants x 3 tolerances:
    our numeric match and upstream's score_answer agree on every pair."""
    reference = _reference_reward()
    golds = [q["answer"] for q in read_items(shared_root() / "questions.jsonl") if "[" not in q["answer"]]
    assert len(golds) >= 60
    disagree = []
    pairs = 0
    for gold in golds:
        for reply in _variants(gold):
            for tolerance in (0.0, 0.01, 0.05):
                pairs += 1
                ours = numeric_match(gold, reply, tolerance)[0]
                theirs = reference.score_answer(gold, reply, tolerance) == 1.0
                if ours != theirs:
                    disagree.append((gold, reply, tolerance, ours, theirs))
    assert pairs > 2000
    assert not disagree, disagree[:10]


# -- items, pages, data roots ---------------------------------------------------------------------

RAW = {
    "uid": "UID0001",
    "question": "What were the total expenditures for national defense in 1940?",
    "answer": "2,602",
    "source_files": ["treasury_bulletin_1941_01.txt"],
    "source_docs": ["https://fraser.stlouisfed.org/title/treasury-bulletin-407/january-1941-6529?page=2"],
    "difficulty": "hard",
    "split": "val",
}


def test_cited_pages_map_urls_to_corpus_files_and_form_feed_pages():
    files = ["treasury_bulletin_2012_06.txt", "treasury_bulletin_2022_06.txt"]
    docs = [
        "https://fraser.stlouisfed.org/title/treasury-bulletin-407/june-2012-7151?page=18",
        "https://fraser.stlouisfed.org/title/treasury-bulletin-407/june-2022-616226?page=20&deep=true",
        "https://fraser.stlouisfed.org/title/treasury-bulletin-407/june-2012-7151?page=18",  # repeat
        "https://example.org/no-page",
    ]
    assert cited_pages(docs, files) == [(files[0], 18), (files[1], 20)]
    text = "page one\fpage two " + "x" * 50 + "\fpage three"
    shown = render_pages([("a.txt", 2), ("a.txt", 9)], lambda _n: text, page_chars=20, total_chars=10_000)
    assert "### a.txt, page 2" in shown and "page two" in shown and "[page cut]" in shown
    assert "page 9" not in shown and "page one" not in shown


def test_an_item_carries_its_bulletins_and_pages_and_no_gold_in_the_task():
    options = OfficeQAOptions()
    item = item_from_raw(RAW, options=options)
    assert item.id == "UID0001" and item.task_type == "difficulty_hard" and item.task.cases == ()
    assert item.grading.attributes == {"answer": "2,602", "grading": "normalized", "numeric_tolerance": 0.0}
    data = b"cover\fDefense 2,602\fother"
    full = attach_corpus(item, RAW, options=options, files={"treasury_bulletin_1941_01.txt": data})
    (case,) = full.task.cases
    assert case.name == "corpus" and case.files[0].content is data
    assert "Defense 2,602" in full.task.attributes["oracle_pages"]
    no_pages = attach_corpus(
        item, RAW, options=OfficeQAOptions(oracle_pages=False), files={"treasury_bulletin_1941_01.txt": data}
    )
    assert no_pages.task.attributes["oracle_pages"] == ""
    assert "2,602" not in json.dumps({k: v for k, v in no_pages.task.attributes.items()})


def test_the_sample_root_and_its_errors(tmp_path):
    data = OfficeQAData()
    assert data.root == SAMPLE_ROOT
    assert {k: len(data.split(k)) for k in ("train", "val", "test")} == {"train": 4, "val": 2, "test": 2}
    assert data.task_types() == ["difficulty_easy", "difficulty_hard"]
    items = data.items()
    assert len(items) <= 8  # upstream gates the answers: at most 8 are committed
    # One bytes object per bulletin, shared by every question citing it.
    by_name = {}
    for it in items:
        for f in it.task.cases[0].files:
            assert by_name.setdefault(f.name, f.content) is f.content
    # The loader builds items with the one raw-item function, then attaches the corpus.
    raws = read_items(SAMPLE_ROOT / "questions.jsonl")
    for raw, it in zip(raws, items, strict=True):
        plain = item_from_raw(raw, options=data.options)
        assert plain.grading == it.grading and plain.task.instruction == it.task.instruction
    (tmp_path / "corpus").mkdir()
    (tmp_path / "questions.jsonl").write_text(json.dumps(RAW) + "\n")
    with pytest.raises(QADataError, match=r"UID0001 cites treasury_bulletin_1941_01.txt, which is not in"):
        OfficeQAData(str(tmp_path))
    with pytest.raises(QADataError, match=r"has no questions\.jsonl"):
        OfficeQAData(str(tmp_path / "corpus"))
    (tmp_path / "questions.jsonl").write_text(json.dumps(RAW | {"source_files": ["../../etc/passwd"]}) + "\n")
    with pytest.raises(QADataError, match="not a plain file name"):
        OfficeQAData(str(tmp_path))


def test_the_shared_root_loads_with_skillopts_split():
    data = OfficeQAData(str(shared_root()))
    sizes = {k: len(data.split(k)) for k in ("train", "val", "test")}
    assert sizes == {"train": 12, "val": 9, "test": 49}
    assert data.describe()["corpus_files"] == 69
    ratio = OfficeQAData(str(shared_root()), split_mode="ratio", split_ratio="1:1:1")
    assert sum(len(ratio.split(k)) for k in ("train", "val", "test")) == 70


# -- the tools' confinement ----------------------------------------------------------------------


@pytest.fixture
def corpus(tmp_path) -> Path:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.txt").write_text("line one\nNational Defense 2,602\n\fpage two\n" + "filler\n" * 100)
    (docs / "sub" / "b.txt").write_text("defense again\n")
    (docs / "huge.txt").write_text("y" * 1_000_000 + "\n" + "defense\n" * 100)
    for i in range(60):
        (docs / f"many_{i:02d}.txt").write_text("z\n")
    (tmp_path / "secret.txt").write_text("GOLD-ANSWER\n")
    os.symlink(tmp_path / "secret.txt", docs / "link.txt")
    os.symlink(tmp_path, docs / "dirlink")
    return docs


def tool(corpus: Path, name: str, args: object, *skill_root: str) -> str:
    res = subprocess.run(
        [sys.executable, "-I", "-c", program_source(), "docs", name, json.dumps(args), *skill_root],
        cwd=corpus.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize(
    ("name", "args", "refusal"),
    [
        ("read", {"path": "../secret.txt"}, "'..' is refused"),
        ("read", {"path": "sub/../../secret.txt"}, "'..' is refused"),
        ("read", {"path": "/etc/passwd"}, "absolute paths are refused"),
        ("read", {"path": "~/x"}, "absolute paths are refused"),
        ("read", {"path": "link.txt"}, "symbolic links are not followed"),
        ("read", {"path": "dirlink/secret.txt"}, "symbolic links are not followed"),
        ("read", {"path": "sub"}, "not a regular file"),
        ("read", {"path": "nope.txt"}, "no such file"),
        ("grep", {"pattern": "GOLD", "path": "../"}, "'..' is refused"),
        ("grep", {"pattern": "GOLD", "path": "link.txt"}, "symbolic links are not followed"),
        ("grep", {"pattern": ""}, "grep needs a literal pattern"),
        ("glob", {"pattern": "../*"}, "'..' and absolute patterns are refused"),
        ("glob", {"pattern": "/etc/*"}, "'..' and absolute patterns are refused"),
        ("read", ["not", "an", "object"], "must be a JSON object"),
        ("read", {"path": "a.txt", "start": "x"}, "start must be a whole number"),
    ],
)
def test_the_tools_refuse_to_leave_the_corpus(corpus, name, args, refusal):
    out = tool(corpus, name, args)
    assert out.startswith("ERROR:") and refusal in out, out
    assert "GOLD-ANSWER" not in out


def test_read_reaches_the_skill_package_by_its_absolute_path_and_nothing_beside_it(corpus, tmp_path):
    skill = tmp_path / "skill"
    (skill / "references").mkdir(parents=True)
    (skill / "references" / "units.md").write_text("# Units\nAmounts are in millions of dollars.\n")
    os.symlink(tmp_path / "secret.txt", skill / "references" / "link.md")
    out = tool(corpus, "read", {"path": "/skill/references/units.md"}, str(skill))
    assert out.startswith("/skill/references/units.md, lines 1-2:") and "millions of dollars" in out
    for path, refusal in (
        ("/skill/../secret.txt", "'..' is refused"),
        ("/skill/references/link.md", "symbolic links are not followed"),
        ("/skill/nope.md", "no such file"),
        ("/skillx/units.md", "absolute paths are refused"),
    ):
        out = tool(corpus, "read", {"path": path}, str(skill))
        assert out.startswith("ERROR:") and refusal in out and "GOLD-ANSWER" not in out, out


def test_the_tools_answer_within_their_caps(corpus):
    listed = tool(corpus, "glob", {"pattern": "*.txt"})
    assert "a.txt (" in listed and "link.txt" not in listed
    assert tool(corpus, "glob", {"pattern": "sub/*"}).startswith("sub/b.txt (")
    assert "... and 13 more; narrow the pattern" in listed  # 63 files, 50 shown
    assert "dirlink" not in tool(corpus, "glob", {"pattern": "*secret*"})
    found = tool(corpus, "grep", {"pattern": "national DEFENSE"})
    assert found.strip() == "a.txt:2 (page 1): National Defense 2,602"
    assert "(page 2): page two" in tool(corpus, "grep", {"pattern": "page two", "path": "a.txt"})
    many = tool(corpus, "grep", {"pattern": "defense"}).splitlines()
    assert len(many) == 21 and many[-1].startswith("... more matches")
    read = tool(corpus, "read", {"path": "docs/a.txt", "start": 2, "limit": 2})
    assert read.startswith("a.txt, lines 2-3:") and "National Defense" in read and "[page break]" in read
    huge = tool(corpus, "read", {"path": "huge.txt", "limit": 400})
    assert len(huge) < 4200 and "cut at 4000 characters" in huge
    assert "shorter" in tool(corpus, "read", {"path": "sub/b.txt", "start": 99})
