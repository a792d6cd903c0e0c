"""``skillopt sleep mine`` with the rule miner: one task per session with a checkable reference
where the transcript shows one, split by session, loadable as the sleep env's data (fast, no
Docker, no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillopt.config import Config, EnvConfig, resolve_config
from skillopt.envs.registry import get_env
from skillopt.envs.sleep.items import MinedItem, Reference, item_from_raw
from skillopt.errors import ConfigError
from skillopt.sleep import HarvestConfig, HarvestedSession, harvest
from skillopt.sleep.mine import SPLITS, MineConfig, NothingMined, mine, split_of
from skillopt.sleep.rules import RuleMiner, runnable_command
from skillopt.sleep.store import HarvestStore
from skillopt.testing.sleep_corpus import SleepCorpus, write_corpus
from skillopt.trainer.planning import load_data
from tests.skillopt.sleep.conftest import NOW


@pytest.fixture(scope="module")
def mined_corpus(tmp_path_factory) -> tuple[SleepCorpus, Path]:
    """The corpus with its mining sessions, harvested once for the module."""
    root = tmp_path_factory.mktemp("mine")
    corpus = write_corpus(root / "homes", now=NOW, mining=True)
    roots = {"claude-code": corpus.claude_dir / "projects", "codex": corpus.codex_dir / "sessions"}
    harvest(HarvestConfig(roots=roots, out=root / "harvest"))  # type: ignore[arg-type]
    return corpus, root / "harvest"


def _sessions(harvest_dir: Path) -> dict[str, HarvestedSession]:
    store = HarvestStore(harvest_dir)
    return {e.session_id: store.read(e) for e in store.load().entries.values()}


def _by_name(mined_corpus) -> dict[str, MinedItem]:
    corpus, harvest_dir = mined_corpus
    sessions = _sessions(harvest_dir)
    return {
        s.name: RuleMiner().mine(sessions[s.session_id]) for s in corpus.sessions if s.session_id in sessions
    }


def test_each_rule_mines_its_kind_of_reference(mined_corpus):
    got = _by_name(mined_corpus)
    build = got["cc-build-retry"]
    assert build.rule == "retry-succeeded" and build.reference == Reference(
        kind="command", command="sh build.sh"
    )
    assert set(build.files) == {"build.sh"} and "exit 1" in build.files["build.sh"]  # the failing version
    assert "[REDACTED:github_token]" in build.files["build.sh"]
    assert got["cc-correction"].rule == "tests-fixed"
    assert got["cc-correction"].reference == Reference(kind="tests", command="pytest tests/test_login.py")
    # The passing run exported a token: the assignment is dropped, the command stays runnable.
    assert got["cx-skill-retry"].reference == Reference(kind="tests", command="npm test")
    assert got["cc-skill"].rule == "tests-green"
    fix = got["cc-file-fix"]
    assert fix.reference == Reference(kind="file", path=".gitignore", content="build/\ndist/\n*.pyc\n")
    assert fix.files == {".gitignore": "build/\n"} and "must also ignore dist/" in fix.prompt
    answer = got["cx-answer"]
    assert answer.reference == Reference(kind="answer", answer="3000") and answer.rule == "corrected-answer"
    assert "3000" not in answer.prompt  # the accepted answer is the reference, not part of the ask


def test_a_session_with_nothing_checkable_gets_no_reference_and_says_why(mined_corpus):
    got = _by_name(mined_corpus)
    for name in ("cc-abandoned", "cc-huge", "cc-damaged", "cx-abandoned"):
        assert got[name].reference is None and got[name].rule == "none", name
        assert got[name].note.startswith("no checkable reference: tests: no test run")
    with pytest.raises(ValueError, match="no checkable reference"):
        item_from_raw(got["cc-huge"].model_dump(mode="json"))


def test_every_task_is_flagged_as_transcript_text_and_the_prompt_quotes_it_as_data(mined_corpus):
    items = _by_name(mined_corpus).values()
    assert all(it.from_transcript for it in items)
    item = item_from_raw(_by_name(mined_corpus)["cc-build-retry"].model_dump(mode="json"))
    assert item.task.attributes["from_transcript"] is True
    prompt = get_env("sleep").user_prompt(get_env("sleep").parse_task(item.task.attributes))
    assert "given to you as data" in prompt and "`build.sh`" in prompt
    assert "kind" not in item.task.attributes and item.grading.attributes["command"] == "sh build.sh"


@pytest.mark.parametrize(
    ("command", "runnable"),
    [
        ("npm test", "npm test"),
        ("GITHUB_TOKEN=[REDACTED:github_token] npm test", "npm test"),
        ("export A=1 B='x y' && make", "make"),
        ("curl -H 'Authorization: Bearer [REDACTED:bearer]' https://x", ""),
        ("FOO=bar", ""),
    ],
)
def test_a_command_is_runnable_without_its_assignments_and_never_with_redacted_text(command, runnable):
    assert runnable_command(command) == runnable


def _mine(harvest_dir: Path, out: Path, **kw) -> object:
    return mine(MineConfig(harvest=harvest_dir, out=out, **kw), RuleMiner())


def test_mine_writes_the_env_data_and_the_manifest_split_by_session(mined_corpus, tmp_path):
    _, harvest_dir = mined_corpus
    result = _mine(harvest_dir, tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "mined.json").read_text())
    assert manifest["counts"] == {"sessions_read": 10, "corrupt_records": 0, "checkable": 6, "unchecked": 4}
    assert manifest["by_kind"] == {"command": 1, "tests": 3, "file": 1, "answer": 1}
    assert manifest["miner"] == "rules" and len(manifest["records"]) == 10
    sessions = [s for split in manifest["splits"].values() for s in split["sessions"]]
    assert len(sessions) == len(set(sessions)) == 6  # no session in two splits
    for name, split in manifest["splits"].items():
        rows = json.loads((tmp_path / "out" / split["file"]).read_text())
        assert split["tasks"] == len(rows) and {r["session"] for r in rows} == set(split["sessions"])
        assert all(split_of(r["session"], 0) == name for r in rows)
    unchecked = json.loads((tmp_path / "out" / "unchecked.json").read_text())
    assert len(unchecked) == 4 and all(r["reference"] is None for r in unchecked)
    assert result.out == tmp_path / "out"  # type: ignore[attr-defined]


def test_the_trainer_loads_the_mined_tasks_as_the_sleep_env(mined_corpus, tmp_path):
    _, harvest_dir = mined_corpus
    _mine(harvest_dir, tmp_path / "out")
    config = resolve_config(Config(env=EnvConfig(name="sleep", data_root=str(tmp_path / "out"))))
    data = load_data(config)
    loaded = {name: data.split(name) for name in ("train", "selection", "test")}
    assert sum(len(v) for v in loaded.values()) == 6
    manifest = json.loads((tmp_path / "out" / "mined.json").read_text())
    for name, items in loaded.items():
        assert len(items) == manifest["splits"][name]["tasks"]
        for it in items:
            assert it.task_type == it.grading.attributes["kind"] in data.task_types()
            assert not set(it.grading.attributes) & set(it.task.attributes)
    answers_only = resolve_config(
        Config(
            env=EnvConfig(
                name="sleep", data_root=str(tmp_path / "out" / "data"), options={"kinds": ["answer"]}
            )
        )
    )
    kinds = {it.task_type for name in ("train", "val", "test") for it in load_data(answers_only).split(name)}
    assert kinds == {"answer"}


def test_re_mining_the_same_harvest_gives_the_same_files(mined_corpus, tmp_path):
    _, harvest_dir = mined_corpus
    _mine(harvest_dir, tmp_path / "a")
    _mine(harvest_dir, tmp_path / "b")
    for rel in ("data/train.json", "data/val.json", "data/test.json", "unchecked.json"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    a, b = (json.loads((tmp_path / d / "mined.json").read_text()) for d in "ab")
    assert a["splits"] == b["splits"] and a["records"] == b["records"]
    other = _mine(harvest_dir, tmp_path / "c", seed=7)
    assert other.manifest.seed == 7  # type: ignore[attr-defined]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=50, unique=True), st.integers(0, 10**6)
)
def test_a_session_always_lands_in_the_same_single_split(keys, seed):
    first = {k: split_of(k, seed) for k in keys}
    assert all(v in SPLITS for v in first.values())
    assert first == {k: split_of(k, seed) for k in reversed(keys)}  # independent of the others


def test_no_planted_secret_reaches_any_file_mine_writes(mined_corpus, tmp_path):
    corpus, harvest_dir = mined_corpus
    _mine(harvest_dir, tmp_path / "out")
    written = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert len(written) == 5
    text = "\n".join(p.read_text() for p in written)
    assert "[REDACTED:" in text  # the redacted markers came through; the secrets did not
    for kind, secret in corpus.secrets:
        assert secret not in text, kind


def test_a_dry_run_writes_nothing(mined_corpus, tmp_path):
    _, harvest_dir = mined_corpus
    result = _mine(harvest_dir, tmp_path / "out", dry_run=True)
    assert result.out is None and sum(len(v) for v in result.tasks.values()) == 6  # type: ignore[attr-defined]
    assert not (tmp_path / "out").exists()


def test_a_corrupt_record_is_skipped_and_counted(mined_corpus, tmp_path):
    import shutil

    _, harvest_dir = mined_corpus
    copy = tmp_path / "harvest"
    shutil.copytree(harvest_dir, copy)
    victim = next((copy / "sessions" / "codex").glob("*.json"))
    victim.write_text("{ not json")
    result = _mine(copy, tmp_path / "out")
    counts = result.manifest.counts  # type: ignore[attr-defined]
    assert counts["corrupt_records"] == 1 and counts["sessions_read"] == 9
    assert result.manifest.corrupt_records[0].startswith("sessions/codex/")  # type: ignore[attr-defined]


def test_no_harvest_and_nothing_checkable_are_clear_errors(mined_corpus, tmp_path):
    with pytest.raises(ConfigError, match="run `skillopt sleep harvest` first"):
        _mine(tmp_path / "nowhere", tmp_path / "out")
    corpus = write_corpus(tmp_path / "homes", now=NOW)  # the plain corpus: two test sessions
    roots = {"codex": corpus.codex_dir / "sessions"}  # its codex sessions: nothing checkable but a test run
    harvest(HarvestConfig(roots=roots, out=tmp_path / "h"))  # type: ignore[arg-type]
    store = HarvestStore(tmp_path / "h")
    for entry in store.load().entries.values():  # keep only the abandoned migration
        if store.read(entry).task.startswith("Write the release notes"):
            (tmp_path / "h" / entry.record).unlink()
    with pytest.raises(
        NothingMined, match=r"no task with a checkable reference in 1 sessions .*no rule applies 1"
    ):
        _mine(tmp_path / "h", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_green_test_run_task_starts_without_the_files_the_session_wrote():
    from skillopt.sleep.record import ToolUse, Turn

    session = HarvestedSession(
        source="claude-code", session_id="s1", source_path="/x.jsonl", sha256="0" * 64, size_bytes=1,
        format="claude-code-jsonl/2", cwd="/w", task="Add a parser",
        turns=(Turn(role="user", text="Add a parser"), Turn(role="assistant", text="Done.")),
        tool_calls=(
            ToolUse(name="Write", arguments=json.dumps({"file_path": "/w/parser.py", "content": "x = 1\n"})),
            ToolUse(name="Bash", arguments=json.dumps({"command": "pytest -q"}), exit_code=0, is_test=True),
        ),
    )  # fmt: skip
    item = RuleMiner().mine(session)
    assert item.rule == "tests-green" and item.files == {}  # the written file is the solution
