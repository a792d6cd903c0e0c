"""``skillopt sleep mine --miner model`` against the scripted model server (real HTTP), and the
``mine`` CLI in process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from controller.cli import main
from skillopt.models.openai_chat import OpenAIChatModel
from skillopt.sleep import HarvestConfig, harvest
from skillopt.sleep.mine import MineConfig, mine
from skillopt.sleep.model_miner import SYSTEM_PROMPT, ModelMiner, parse_reply
from skillopt.testing.scripted import ScriptedModelServer
from skillopt.testing.sleep_corpus import SleepCorpus, write_corpus
from tests.skillopt.sleep.conftest import NOW

GOOD = {
    "prompt": "Make the build script work",
    "files": {"build.sh": "#!/bin/sh\nexit 1\n"},
    "reference": {"kind": "command", "command": "sh build.sh"},
}


@pytest.fixture(scope="module")
def harvested(tmp_path_factory) -> tuple[SleepCorpus, Path]:
    root = tmp_path_factory.mktemp("mine-model")
    corpus = write_corpus(root / "homes", now=NOW, mining=True)
    roots = {"claude-code": corpus.claude_dir / "projects", "codex": corpus.codex_dir / "sessions"}
    harvest(HarvestConfig(roots=roots, out=root / "harvest"))  # type: ignore[arg-type]
    return corpus, root / "harvest"


@pytest.fixture
def server():
    """Answers the sessions that mention build.sh with a task, the others without a reference."""

    def reply(req) -> str:
        text = json.dumps(req.body)
        if "build.sh" in text:
            return "```json\n" + json.dumps(GOOD) + "\n```"
        if "gitignore" in text:
            return json.dumps({"prompt": "Write a .gitignore", "files": {}, "reference": {"kind": "file"}})
        if "dev server" in text:
            return "Sure! The task is to find the port."  # not JSON
        return json.dumps({"prompt": "something", "files": {}, "reference": None})

    with ScriptedModelServer() as srv:
        srv.add_responder(reply)
        yield srv


def _model(server) -> OpenAIChatModel:
    return OpenAIChatModel("scripted", base_url=server.base_url, api_key="", max_retries=0)


def test_replies_are_validated_and_a_reply_without_a_reference_is_rejected():
    assert parse_reply(json.dumps(GOOD)).reference is not None
    with pytest.raises(ValueError, match="not a JSON object"):
        parse_reply("Here you go: the task")
    with pytest.raises(
        ValueError, match=r"reference: Value error, a command reference needs a non-empty 'command'"
    ):
        parse_reply(json.dumps({"prompt": "p", "reference": {"kind": "command"}}))
    with pytest.raises(ValueError, match="redacted text"):
        parse_reply(
            json.dumps({"prompt": "p", "reference": {"kind": "tests", "command": "x [REDACTED:jwt]"}})
        )


def test_the_model_miner_keeps_checkable_tasks_and_counts_rejections(harvested, server, tmp_path):
    corpus, harvest_dir = harvested
    result = mine(
        MineConfig(harvest=harvest_dir, out=tmp_path / "out"), ModelMiner(_model(server), "m"), model="m"
    )
    m = result.manifest
    assert m.miner == "model" and m.model == "m" and m.counts["checkable"] == 1
    assert m.by_kind["command"] == 1 and m.counts["unchecked"] == 9
    assert m.unchecked_reasons == {"model-rejected": 9}
    notes = {it.note for it in result.unchecked}
    assert "rejected: the model gave no checkable reference" in notes
    assert any("a file reference needs a non-empty 'path'" in n for n in notes)
    assert any("not a JSON object" in n for n in notes)
    # What went out was the redacted record inside <transcript> tags, with the data warning.
    bodies = [json.dumps(r.body) for r in server.requests if r.api == "chat"]
    assert len(bodies) == 10 and all("<transcript>" in b and "never follow" in b for b in bodies)
    sent = "\n".join(bodies)
    assert all(secret not in sent for _, secret in corpus.secrets)
    written = "\n".join(p.read_text() for p in (tmp_path / "out").rglob("*.json"))
    assert all(secret not in written for _, secret in corpus.secrets)


def test_a_model_dry_run_prints_what_would_be_sent_and_sends_and_writes_nothing(harvested, server, tmp_path):
    _, harvest_dir = harvested
    shown: list[str] = []
    miner = ModelMiner(_model(server), "m")
    config = MineConfig(harvest=harvest_dir, out=tmp_path / "out", dry_run=True)
    result = mine(config, miner, preview=lambda session, text: shown.append(text))
    assert len(shown) == 10 and all(text.startswith("[system]\n" + SYSTEM_PROMPT) for text in shown)
    assert server.requests == [] and result.out is None and not (tmp_path / "out").exists()


@pytest.fixture
def workdir(harvested, monkeypatch, tmp_path):
    _, harvest_dir = harvested
    shutil.copytree(harvest_dir, tmp_path / ".skillopt/sleep/harvest")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_cli_mines_into_the_default_folder(workdir, capsys):
    assert main(["sleep", "mine"]) == 0
    out = capsys.readouterr().out
    assert "tasks with a checkable reference: 6 (command 1, tests 3, file 1, answer 1)" in out
    assert "tasks without one (kept out of the splits): 4" in out
    (folder,) = (workdir / ".skillopt/sleep/mined").iterdir()
    assert (folder / "mined.json").is_file() and f"--set env.data_root={folder.relative_to(workdir)}" in out


def test_cli_dry_runs_write_nothing(workdir, capsys, server):
    assert main(["sleep", "mine", "--dry-run", "--out", "o"]) == 0
    out = capsys.readouterr().out
    assert "would write train:" in out and "nothing written (--dry-run)" in out
    assert main(["sleep", "mine", "--dry-run", "--miner", "model", "--model", "m", "--out", "o"]) == 0
    out = capsys.readouterr().out
    assert out.count("--- would send for") == 10 and "<transcript>" in out
    assert not (workdir / "o").exists() and server.requests == []


def test_cli_model_miner_over_a_provider_spec(workdir, capsys, server):
    spec = f"scripted=openai_compatible,base_url={server.base_url},max_retries=0"
    argv = ["sleep", "mine", "--miner", "model", "--model", "m", "--provider-spec", spec, "--out", "o"]
    assert main(argv) == 0
    assert "tasks with a checkable reference: 1 (command 1)" in capsys.readouterr().out
    assert json.loads((workdir / "o" / "mined.json").read_text())["model"] == "m"


def test_cli_errors_say_what_to_do(workdir, tmp_path, capsys):
    assert main(["sleep", "mine", "--harvest", str(tmp_path / "none")]) == 2
    assert "run `skillopt sleep harvest` first" in capsys.readouterr().err
    assert main(["sleep", "mine", "--miner", "model"]) == 2
    assert "--miner model needs --model NAME" in capsys.readouterr().err
    # A harvest of only the long summarising session: nothing checkable, exit 1, nothing written.
    one = tmp_path / "one" / "sessions" / "claude-code"
    one.mkdir(parents=True)
    for record in (workdir / ".skillopt/sleep/harvest/sessions/claude-code").glob("*.json"):
        if '"Walk through every module' in record.read_text():
            shutil.copy(record, one / record.name)
    assert main(["sleep", "mine", "--harvest", str(tmp_path / "one"), "--out", "nothing"]) == 1
    err = capsys.readouterr().err
    assert "no task with a checkable reference in 1 sessions" in err and "no rule applies 1" in err
    assert not (workdir / "nothing").exists()
