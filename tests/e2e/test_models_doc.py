"""docs/models.md's stand-in endpoint works as written: the scripted model server started by
the documented command with the documented scenario, the documented providers file pointing a
profile at it, `skillopt models check --call` passing for both roles, and each rule answering
what its role must answer (the target one fenced python block, the optimizer a patch the
analyst's parser reads)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import openai
import pytest

from skillopt.agents.codegen import extract_code
from skillopt.reflection.patches import parse_analyst_reply

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "models.md"


def _section_blocks() -> dict[str, list[str]]:
    """The fenced blocks of the 'A stand-in endpoint' section, by language."""
    text = DOC.read_text()
    start = text.index("### A stand-in endpoint for your own setup")
    end = text.index("\n## ", start) if "\n## " in text[start:] else len(text)
    blocks: dict[str, list[str]] = {}
    for lang, body in re.findall(r"^```(\w+)\n(.*?)^```$", text[start:end], flags=re.S | re.M):
        blocks.setdefault(lang, []).append(body)
    return blocks


def _command(block: str) -> list[str]:
    """A documented shell command: continuation lines joined, comments and `&` dropped."""
    line = " ".join(part.split("#")[0].rstrip().removesuffix("\\") for part in block.splitlines())
    return shlex.split(line.replace(" &", " "))


@pytest.fixture
def server(tmp_path):
    blocks = _section_blocks()
    scenario = next(b for b in blocks["yaml"] if b.startswith("rules:"))
    (tmp_path / "scenario.yaml").write_text(scenario)
    argv = _command(next(b for b in blocks["bash"] if "scripted_server" in b))
    assert argv[:3] == ["python", "-m", "skillopt.testing.scripted_server"]
    argv = [sys.executable, *argv[1:]]
    argv[argv.index("--port") + 1] = "0"  # the documented port may be taken here
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert proc.stdout is not None
    try:
        url = proc.stdout.readline().strip()  # printed once bound
        assert url, "the scripted server printed no URL"
        yield tmp_path, int(url.rsplit(":", 1)[1].split("/")[0]), blocks
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_stand_in_endpoint_of_the_models_doc_works_as_written(server):
    tmp_path, port, blocks = server
    providers = next(b for b in blocks["yaml"] if b.startswith("# providers.yaml"))
    (tmp_path / "providers.yaml").write_text(providers.replace(":8311/", f":{port}/"))
    check = _command(next(b for b in blocks["bash"] if "models check" in b))
    assert check[:3] == ["skillopt", "models", "check"]
    res = subprocess.run(
        [sys.executable, "-m", "controller.cli", *check[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OPENAI_API_KEY": "", "PYTHONPATH": str(REPO)},
    )
    assert res.returncode == 0 and res.stdout.count("call: ok in") == 2, res.stdout + res.stderr
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused")

    def ask(prompt: str) -> str:
        reply = client.chat.completions.create(model="fake", messages=[{"role": "user", "content": prompt}])
        return reply.choices[0].message.content or ""

    code = extract_code(ask("Fill C2:C7 with the sum of columns A and B on each row."))
    assert "load_workbook(INPUT_PATH)" in code and "wb.save(OUTPUT_PATH)" in code
    compile(code, "<target>", "exec")
    patch = parse_analyst_reply(
        ask("You are the failure analyst. ..."), source_type="failure", budget=4, chunk_ids=("a",)
    )
    assert [(e.op, e.content.splitlines()[0]) for e in patch.items] == [("append", "## Sheets")]
    assert ask("something no rule matches") == "I cannot do this one."
