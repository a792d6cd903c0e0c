"""The offline simulation over data it has no rules for (full datasets on ``serve --simulate``
hosts): the target answers generically and the answer is graded on its merits; agent CLIs get a
clear HTTP 400. Before, such a request crashed the scripted server (an AttributeError in the
miss message) and every row became an infrastructure error."""

from __future__ import annotations

import openai
import pytest

from skillopt.envs._qa.scoring import score_item
from skillopt.testing.simulation import SIM_TARGET, simulation_server


@pytest.fixture(scope="module")
def sim():
    with (
        simulation_server() as server,
        openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0) as client,
    ):
        yield client


def ask(client, prompt: str) -> str:
    reply = client.chat.completions.create(model=SIM_TARGET, messages=[{"role": "user", "content": prompt}])
    return reply.choices[0].message.content


def test_an_unknown_spreadsheet_task_gets_a_program_that_saves_its_input_unchanged(sim):
    text = ask(sim, "# Instruction\nSum the totals of every region into H2.\nInstruction type: Cell-Level\n")
    code = text.split("```python\n", 1)[1].rsplit("\n```", 1)[0]
    compile(code, "solution.py", "exec")  # a program, graded on its merits by the real grader
    assert 'INPUT_PATH = "input.xlsx"' in code and "wb.save(OUTPUT_PATH)" in code


def test_an_unknown_question_gets_an_answer_graded_on_its_merits(sim):
    text = ask(sim, "Question: which river flows through the city of Zorbania?\nAnswer with a short phrase.")
    item = {"id": "x1", "question": "which river?", "context": "[DOC] a page", "answers": ["Danube"]}
    row = score_item("searchqa", item, text)
    assert (row["hard"], row["fail_reason"] != "") == (0.0, True)
    assert "unknown" in row["answer"].lower()


def test_an_agent_cli_meeting_an_unknown_task_gets_a_clear_400(sim):
    with pytest.raises(openai.BadRequestError, match=r"only know the \d+ vendored sample tasks"):
        sim.responses.create(model=SIM_TARGET, input="Spreadsheet task: something the catalogue lacks")
