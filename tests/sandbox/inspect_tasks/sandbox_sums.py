"""Tiny Inspect AI tasks whose solver and scorer run in the ``skillopt`` sandbox (each sample in
its own session). ``sums`` computes in the sandbox and checks the file it wrote; ``stuck`` runs
into its time limit while a command runs, so its sample is cancelled mid-exec."""

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox

SUMMER = "import sys; print(sum(int(x) for x in open('input.txt').read().split()))"


@solver
def compute_in_sandbox():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await sandbox().write_file("input.txt", state.input_text)
        # A file only this sample's session holds: a shared session would mix the samples up.
        result = await sandbox().exec(["sh", "-c", f'python3 -c "{SUMMER}" > answer.txt'])
        assert result.success, result.stderr
        # No model call: mockllm's token counting wants tiktoken's encodings from the internet,
        # which this offline machine cannot reach. The model is not what this eval tests.
        return state

    return solve


@solver
def run_forever():
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await sandbox().exec(["sleep", "600"], timeout=900)
        return state

    return solve


@scorer(metrics=[accuracy()])
def answer_file():
    async def score(state: TaskState, target: Target) -> Score:
        answer = (await sandbox().read_file("answer.txt")).strip()
        return Score(value=CORRECT if answer == target.text else INCORRECT, answer=answer)

    return score


@task
def sums() -> Task:
    return Task(
        dataset=[
            Sample(input="1 2 3", target="6"),
            Sample(input="10 20", target="30"),
            Sample(input="5 5 5 5", target="20"),
            Sample(input="7", target="7"),
        ],
        solver=compute_in_sandbox(),
        scorer=answer_file(),
        sandbox="skillopt",
    )


@task
def stuck() -> Task:
    return Task(
        dataset=[Sample(input="x", target="x")],
        solver=run_forever(),
        scorer=answer_file(),
        sandbox="skillopt",
        time_limit=3,
    )
