"""The SpreadsheetBench environment as the sandbox service runs it."""

from __future__ import annotations

import io
import zipfile

from skillopt.envs.base import ComposedEnv
from skillopt.envs.spreadsheetbench.agents import build_agents
from skillopt.envs.spreadsheetbench.official import GRADING_MODES
from skillopt.envs.spreadsheetbench.positions import parse_answer_position
from skillopt.envs.spreadsheetbench.spec import SPEC
from skillopt.errors import InvalidRequest
from skillopt.types import RolloutRequest

__all__ = ["SpreadsheetBenchEnv"]

_MAX_CASES = 32


def _check_xlsx(data: bytes, what: str) -> None:
    """Refuse bytes that are not an xlsx workbook (a zip holding ``[Content_Types].xml``)."""
    if data[:4] != b"PK\x03\x04":
        raise InvalidRequest(f"{what} is not an xlsx workbook (not a zip archive)")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            if "[Content_Types].xml" not in zf.namelist():
                raise InvalidRequest(f"{what} is a zip archive but not an xlsx workbook")
    except zipfile.BadZipFile as exc:
        raise InvalidRequest(f"{what} is a corrupt zip archive: {exc}") from exc


class SpreadsheetBenchEnv(ComposedEnv):
    """Codegen, ReAct and agent-CLI agents over real SpreadsheetBench tasks, graded with the
    official value rules."""

    spec = SPEC

    def build_agents(self):
        return build_agents()

    def check_request(self, request: RolloutRequest) -> None:
        task, grading = request.task, request.grading
        if not task.cases:
            raise InvalidRequest("spreadsheetbench: the task has no test cases")
        if len(task.cases) > _MAX_CASES:
            raise InvalidRequest(f"spreadsheetbench: at most {_MAX_CASES} test cases per task")
        gold = {c.name: c for c in grading.cases}
        for case in task.cases:
            names = [f.name for f in case.files]
            if names != ["input.xlsx"]:
                raise InvalidRequest(
                    f"spreadsheetbench: task case {case.name!r} must hold exactly one file 'input.xlsx', got {names}"
                )
            _check_xlsx(case.files[0].content, f"task case {case.name!r} input.xlsx")
            g = gold.get(case.name)
            if g is None or [f.name for f in g.files] != ["answer.xlsx"]:
                raise InvalidRequest(
                    f"spreadsheetbench: grading must hold 'answer.xlsx' for case {case.name!r}"
                )
            _check_xlsx(g.files[0].content, f"grading case {case.name!r} answer.xlsx")
        if set(gold) != {c.name for c in task.cases}:
            raise InvalidRequest("spreadsheetbench: grading cases do not match the task's cases")
        mode = grading.attributes.get("grading_mode", "corrected")
        if mode not in GRADING_MODES:
            raise InvalidRequest(
                f"spreadsheetbench: grading.attributes.grading_mode must be one of {', '.join(GRADING_MODES)}, got {mode!r}"
            )
        position = grading.attributes.get("answer_position") or task.attributes.get("answer_position")
        if not position:
            raise InvalidRequest("spreadsheetbench: answer_position is missing from the grading attributes")
        try:
            parse_answer_position(str(position))
        except ValueError as exc:
            raise InvalidRequest(f"spreadsheetbench: bad answer_position: {exc}") from exc
