"""Sandbox benchmarks (figures, not tests). Run: ``python bench/bench_sandbox.py``.

1. Cold container: ``docker run`` + wait + remove, and ``docker exec true``, via the docker SDK.
2. Rollout start → the generated code's first instruction, at concurrency 1 and 8, through a
   real sandbox service (gRPC on a socket, warm pool, the scripted model server as the target);
   ``warm_excl_model_*`` is that time without the model call.
3. gRPC overhead per rollout: the client's wall time of ``Run`` minus the rollout's own time on
   the host, with a 200 KB skill in and the trace (which carries it) out. The skill is sent
   once, then named by its SHA-256 (content addressing), and the trace carries it back as a
   marker; the same figure with a 1-byte skill shows what is left of the skill's cost.
4. The same generated load-edit-save script on real SpreadsheetBench inputs: in the sandbox
   (warm container, runner fork) vs a bare ``python script.py`` subprocess on the host.
5. A skill package of 50 files, 2 MiB: the bytes the client sends on its first and second
   rollout of the version (files, and the serialized Skill message), the gRPC overhead per
   rollout against a one-file skill (the same SKILL.md alone), and rollout start -> first
   instruction with the package mounted and without, side by side (alternating rollouts).

Timings are noisy on a shared 2-core machine: compare the columns of one run, side by side.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from controller.client.sandbox_client import ChannelConfig, SandboxClient  # noqa: E402
from controller.embedded import spawn_service, wait_listening  # noqa: E402
from sandbox.runtime.docker.runtime import DockerRuntime  # noqa: E402
from sandbox.runtime.lease import LeasedSandbox  # noqa: E402
from sandbox.runtime.spec import DEFAULT_IMAGE, ContainerSpec, RuntimeConfig  # noqa: E402
from skillopt.envs.registry import load_env_data  # noqa: E402
from skillopt.envs.spreadsheetbench.loader import SAMPLE_ROOT, SpreadsheetBenchData, build_task  # noqa: E402
from skillopt.testing.shared_data import shared_datasets  # noqa: E402
from skillopt.types import Limits, ModelSpec, RolloutRequest, SkillFile, SkillVersion  # noqa: E402

SHARED = (shared_datasets() or ROOT / "missing") / "spreadsheetbench"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = min(len(values) - 1, max(0, round(q / 100 * (len(values) - 1))))
    return values[k]


def cold_docker(n: int) -> dict[str, float]:
    client = docker.from_env()
    runs, execs = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        c = client.containers.run(DEFAULT_IMAGE, ["true"], detach=True, network_mode="none")
        c.wait()
        c.remove(force=True)
        runs.append((time.perf_counter() - t0) * 1000)
    c = client.containers.run(DEFAULT_IMAGE, ["sleep", "300"], detach=True, network_mode="none")
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            c.exec_run(["true"])
            execs.append((time.perf_counter() - t0) * 1000)
    finally:
        c.remove(force=True)
    return {"run_p50_ms": statistics.median(runs), "exec_p50_ms": statistics.median(execs)}


FIRST = "import time as _t\nprint(_t.time_ns(), flush=True)\n"


_HZ = os.sysconf("SC_CLK_TCK")


def _busy_jiffies() -> tuple[int, int]:
    """(busy, total) CPU jiffies of the whole machine, from /proc/stat (0, 0 elsewhere)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def _wait_idle(client: SandboxClient, n: int) -> None:
    # A benchmark may poll: wait until the host reports n warm containers.
    for _ in range(600):
        if sum(client.describe().pool_idle.values()) >= n:
            return
        time.sleep(0.1)


def codegen_request(
    task, grading, *, skill: SkillVersion | None = None, tag: str = "bench", wall_time_s: float = 60
) -> RolloutRequest:
    """One SpreadsheetBench ``codegen_single`` rollout against the scripted provider (the
    benches' unit of work), with a fresh rollout id."""
    return RolloutRequest(
        rollout_id=f"{tag}/{uuid.uuid4().hex}",
        env="spreadsheetbench",
        agent="codegen_single",
        task=task,
        grading=grading,
        skill=skill if skill is not None else SkillVersion(content=""),
        model=ModelSpec(provider="scripted", model="m"),
        limits=Limits(wall_time_s=wall_time_s, exec_timeout_s=30),
    )


@contextlib.contextmanager
def model_server(reply: str) -> Iterator[str]:
    """The scripted model server (always answering ``reply``), a process of its own; yields its
    base URL."""
    tmp = Path(tempfile.mkdtemp(prefix="so-bench-model-", dir="/tmp"))
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({"rules": [], "default": {"reply": {"text": reply}}}))
    model = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "skillopt.testing.scripted_server",
            "--scenario",
            str(scenario),
            "--port",
            "0",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        base_url = model.stdout.readline().split()[-1]  # its first line is the base URL
        threading.Thread(target=model.stdout.read, daemon=True).start()
        yield base_url
    finally:
        model.send_signal(signal.SIGTERM)
        model.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def host(
    base_url: str,
    concurrency: int,
    *,
    host_id: str = "",
    extra: list[str] | None = None,
) -> Iterator[tuple[subprocess.Popen, SandboxClient, Path]]:
    """A real ``skillopt serve`` process (capacity and warm pool ``concurrency``, the scripted
    model at ``base_url`` as provider ``scripted``); yields the process, a client of it and its
    directory (token, ``state/``, and ``tmp/``, its ``TMPDIR``: every file it leaves is there).
    The process is stopped with SIGTERM (a drain) at the end unless it already exited."""
    tmp = Path(tempfile.mkdtemp(prefix="so-bench-", dir="/tmp"))
    (tmp / "token").write_text("bench")
    (tmp / "tmp").mkdir()
    service = spawn_service(
        [
            "--listen", "127.0.0.1:0", "--token-file", str(tmp / "token"),
            "--host-id", host_id or f"bench-{uuid.uuid4().hex[:6]}", "--state-dir", str(tmp / "state"),
            "--capacity", str(concurrency), "--pool-size", str(concurrency),
            "--provider", f"scripted=openai_compatible,base_url={base_url},max_retries=0",
            "--log-level", "warning", *(extra or []),
        ],
        env={"TMPDIR": str(tmp / "tmp")},
    )  # fmt: skip
    client: SandboxClient | None = None
    try:
        port = wait_listening(service, 120)
        client = SandboxClient(ChannelConfig(address=f"127.0.0.1:{port}", token="bench"))
        yield service, client, tmp
    finally:
        if client is not None:
            client.close()
        if service.poll() is None:
            service.send_signal(signal.SIGTERM)
            service.wait(60)
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def served(reply: str, concurrency: int) -> Iterator[SandboxClient]:
    """The production shape: a sandbox service and the scripted model server (always answering
    ``reply``), processes of their own; yields a client of the service."""
    with model_server(reply) as base_url, host(base_url, concurrency) as (_, client, _dir):
        yield client


def first_instruction(waves: int, concurrency: int) -> dict[str, float]:
    """Rollout start -> the generated code's first instruction (its printed clock)."""
    sample = SpreadsheetBenchData(SAMPLE_ROOT)
    task, grading = build_task(sample.task("32255"))
    with served(f"```python\n{FIRST}```", concurrency) as client:
        return _first_instruction(client, task, grading, waves, concurrency)


def _first_instruction(
    client: SandboxClient, task, grading, waves: int, concurrency: int
) -> dict[str, float]:
    phases: list[dict[str, float]] = []  # client-side arrival of each progress phase, ms after t0

    def one(i: int) -> tuple[float, float, float]:
        events: dict[str, int] = {}
        req = codegen_request(task, grading)
        t0 = time.time_ns()
        row = client.run(req, timeout_s=120, on_event=lambda e: events.setdefault(e.phase, time.time_ns()))
        first = int(row.trace.executions[0].stdout_tail.split()[0])
        phases.append(
            {k: (v - t0) / 1e6 for k, v in events.items()} | {"first_instruction": (first - t0) / 1e6}
        )
        return (
            (first - t0) / 1e6,
            row.timings_s.get("model", 0.0) * 1000,
            row.timings_s.get("acquire", 0.0) * 1000,
        )

    one(0)  # connection set-up and first-use imports are not what we measure
    phases.clear()
    warm, model_ms, acquire_ms = [], [], []
    busy = total = 0
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for _ in range(waves):
            _wait_idle(client, concurrency)
            busy0, total0 = _busy_jiffies()
            for total_ms, m, a in pool.map(one, range(concurrency)):
                warm.append(total_ms)
                model_ms.append(m)
                acquire_ms.append(a)
            busy1, total1 = _busy_jiffies()
            busy, total = busy + busy1 - busy0, total + total1 - total0
        warm_phases = list(phases)
        _wait_idle(client, concurrency)
        t0 = time.monotonic()
        sustained = list(pool.map(one, range(waves * concurrency)))
        wall = time.monotonic() - t0
    excl = [t - m for t, m in zip(warm, model_ms, strict=True)]
    # Where the time goes: when each phase's event reached the client (median over warm rollouts).
    order = ["accepted", "sandbox_ready", "model_call", "model_reply", "exec", "first_instruction"]
    breakdown = {
        f"at_{k}_p50_ms": pct([p[k] for p in warm_phases if k in p], 50)
        for k in order
        if any(k in p for p in warm_phases)
    }
    return {
        "warm_p50_ms": pct(warm, 50),
        "warm_p99_ms": pct(warm, 99),
        "warm_excl_model_p50_ms": pct(excl, 50),
        "warm_excl_model_p99_ms": pct(excl, 99),
        "model_call_p50_ms": pct(model_ms, 50),
        "acquire_p50_ms": pct(acquire_ms, 50),
        "sustained_p50_ms": pct([s[0] for s in sustained], 50),
        "sustained_p99_ms": pct([s[0] for s in sustained], 99),
        "sustained_rollouts_per_min": len(sustained) / wall * 60,
        "n_warm": len(warm),
        **breakdown,
        # Share of the machine's CPUs busy while the warm waves ran: near 1.0 means the start
        # latency at this concurrency is CPU-bound (every process on the host counts).
        "machine_cpu_busy_during_waves": busy / total if total else float("nan"),
        # Every process's CPU (client, service, model server, runners, engine, kernel) per warm
        # rollout, start to result: with 8 starting at once on C cores, a fair scheduler puts the
        # median first instruction near 8 x (the share of this spent before it) / C.
        "machine_cpu_ms_per_rollout_during_waves": busy / _HZ * 1000 / len(warm) if total else float("nan"),
    }


def grpc_overhead(n: int, in_bytes: int = 200 * 1024) -> dict[str, float]:
    """What gRPC and the service's door cost a rollout: the client's wall time of ``Run`` minus
    the rollout's own time on the host (``timings_s.total``: from the worker picking it up to
    its result). Covers both conversions, serialization, validation, the request fingerprint,
    admission, the hand-off to the worker thread, the event stream and the result. The request
    carries ``in_bytes`` of skill; the agent puts it in its prompt, so the trace (and the
    result) carries it back out. A QA env: no container, an instant scripted model."""
    item = load_env_data("gsm8k").split("val")[0]
    skill = ("- " + "Check each step of the arithmetic before answering. " * 20 + "\n") * (
        in_bytes // 1000 + 1
    )
    skill = skill[:in_bytes]
    with served("The answer is 42.", 1) as client:

        def one() -> tuple[float, float, int]:
            req = RolloutRequest(
                rollout_id=f"bench/{uuid.uuid4().hex}",
                env="gsm8k",
                agent="qa",
                task=item.task,
                grading=item.grading,
                skill=SkillVersion(content=skill),
                model=ModelSpec(provider="scripted", model="m"),
                limits=Limits(wall_time_s=60, max_turns=1),
            )
            t0 = time.perf_counter()
            row = client.run(req, timeout_s=60)
            wall = time.perf_counter() - t0
            assert row.infra_error is None, row.infra_error
            out = sum(len(m.content) for m in row.trace.messages)
            return wall * 1000, (wall - row.timings_s["total"]) * 1000, out

        for _ in range(5):
            one()  # channel set-up, first-use imports
        rows = [one() for _ in range(n)]
    overhead = [r[1] for r in rows]
    return {
        "rollouts": n,
        "request_skill_bytes": in_bytes,
        "trace_message_bytes_out": rows[0][2],
        "rpc_wall_p50_ms": pct([r[0] for r in rows], 50),
        "grpc_overhead_p50_ms": pct(overhead, 50),
        "grpc_overhead_p90_ms": pct(overhead, 90),
        "grpc_overhead_p99_ms": pct(overhead, 99),
    }


def bench_package(files: int = 50, total_bytes: int = 2 * 1024 * 1024) -> SkillVersion:
    """A package of ``files`` files (SKILL.md, a script, references) and about ``total_bytes``."""
    salt = uuid.uuid4().hex
    each = total_bytes // (files - 1)

    def text(head: str) -> bytes:
        line = f"{head} " + "y" * 79 + "\n"
        return line.encode() * (each // len(line))

    refs = [SkillFile(path=f"references/r{i:03d}.md", data=text(f"# {salt} {i}")) for i in range(files - 2)]
    script = SkillFile(path="scripts/check.py", data=text("print('ok')  #"), executable=True)
    return SkillVersion(
        name="bench-pkg",
        content=f"---\nname: bench-pkg\ndescription: Bench package {salt}.\n---\n# Bench\nSee references/.\n",
        files=tuple(sorted([*refs, script], key=lambda f: f.path)),
    )


def package_wire(n: int) -> dict[str, float]:
    """Bytes and gRPC overhead of a 50-file, 2 MiB package vs its SKILL.md alone (gsm8k QA: no
    container, an instant scripted model), rollouts alternating between the two."""
    item = load_env_data("gsm8k").split("val")[0]
    pkg = bench_package()
    one_file = SkillVersion(name=pkg.name, content=pkg.content)
    with served("The answer is 42.", 1) as client:

        def req(skill: SkillVersion) -> RolloutRequest:
            return RolloutRequest(
                rollout_id=f"bench/{uuid.uuid4().hex}",
                env="gsm8k",
                agent="qa",
                task=item.task,
                grading=item.grading,
                skill=skill,
                model=ModelSpec(provider="scripted", model="m"),
                limits=Limits(wall_time_s=60, max_turns=1),
            )

        def one(skill: SkillVersion) -> float:
            t0 = time.perf_counter()
            row = client.run(req(skill), timeout_s=60)
            wall = time.perf_counter() - t0
            assert row.infra_error is None, row.infra_error
            return (wall - row.timings_s["total"]) * 1000

        figures: dict[str, float] = {
            "package_files": 1 + len(pkg.files),
            "package_bytes": len(pkg.content) + sum(len(f.data) for f in pkg.files),
        }
        for _ in range(5):
            one(one_file)  # channel set-up, first-use imports
        for label in ("first", "second"):
            inline0 = client.blobs.inline_bytes
            msg_bytes = client._message(req(pkg))[0].skill.ByteSize()  # what this rollout sends
            client.blobs.inline_bytes = inline0  # (that look counted as a send)
            one(pkg)
            figures[f"{label}_rollout_file_bytes_sent"] = client.blobs.inline_bytes - inline0
            figures[f"{label}_rollout_skill_message_bytes"] = msg_bytes
        package_ms: list[float] = []
        one_file_ms: list[float] = []
        for i in range(n):
            for skill in (pkg, one_file) if i % 2 else (one_file, pkg):
                (package_ms if skill is pkg else one_file_ms).append(one(skill))
    return figures | {
        "rollouts_each": n,
        "grpc_overhead_package_p50_ms": pct(package_ms, 50),
        "grpc_overhead_one_file_p50_ms": pct(one_file_ms, 50),
        "grpc_overhead_delta_p50_ms": pct(package_ms, 50) - pct(one_file_ms, 50),
        "grpc_overhead_package_p90_ms": pct(package_ms, 90),
        "grpc_overhead_one_file_p90_ms": pct(one_file_ms, 90),
    }


def package_first_instruction(n: int) -> dict[str, float]:
    """Rollout start -> first instruction at concurrency 1, with the 50-file package mounted and
    with its SKILL.md alone, rollouts alternating (a warm container each, waited for)."""
    sample = SpreadsheetBenchData(SAMPLE_ROOT)
    task, grading = build_task(sample.task("32255"))
    pkg = bench_package()
    one_file = SkillVersion(name=pkg.name, content=pkg.content)
    with served(f"```python\n{FIRST}```", 1) as client:

        def one(skill: SkillVersion) -> tuple[float, float]:
            _wait_idle(client, 1)
            req = RolloutRequest(
                rollout_id=f"bench/{uuid.uuid4().hex}",
                env="spreadsheetbench",
                agent="codegen_single",
                task=task,
                grading=grading,
                skill=skill,
                model=ModelSpec(provider="scripted", model="m"),
                limits=Limits(wall_time_s=60, exec_timeout_s=30),
            )
            t0 = time.time_ns()
            row = client.run(req, timeout_s=120)
            assert row.infra_error is None, row.infra_error
            first = int(row.trace.executions[0].stdout_tail.split()[0])
            return (first - t0) / 1e6, row.timings_s.get("skill", 0.0) * 1000

        one(one_file)
        one(pkg)  # the version reaches the host: what follows is its steady state
        with_pkg: list[float] = []
        without: list[float] = []
        place: list[float] = []
        for i in range(n):
            for skill in (pkg, one_file) if i % 2 else (one_file, pkg):
                ms, skill_ms = one(skill)
                if skill is pkg:
                    with_pkg.append(ms)
                    place.append(skill_ms)
                else:
                    without.append(ms)
    return {
        "rollouts_each": n,
        "first_instruction_package_p50_ms": pct(with_pkg, 50),
        "first_instruction_one_file_p50_ms": pct(without, 50),
        "ratio_p50": pct(with_pkg, 50) / pct(without, 50),
        "place_package_p50_ms": pct(place, 50),
    }


SCRIPT = """import openpyxl
wb = openpyxl.load_workbook(INPUT_PATH)
ws = wb.worksheets[0]
ws.cell(row=ws.max_row + 1, column=1, value="checked")
wb.save(OUTPUT_PATH)
"""


def same_script(n_tasks: int) -> dict[str, float]:
    data = SpreadsheetBenchData(SHARED if SHARED.exists() else SAMPLE_ROOT)
    records = [r for r in data.records if r.cases][:n_tasks]
    state = tempfile.mkdtemp(prefix="so-bench2-", dir="/tmp")
    rt = DockerRuntime(RuntimeConfig(host_id=f"bench2-{uuid.uuid4().hex[:6]}", state_dir=state, pool_size=0))
    handle = rt.create(ContainerSpec())
    box = LeasedSandbox(rt, handle)
    sandbox_ms, host_ms = [], []
    work = Path(tempfile.mkdtemp(prefix="so-bench2-host-"))
    try:
        for rec in records:
            data_in = rec.cases[0].input_path.read_bytes()
            box.write_file("in.xlsx", data_in)
            box.write_file("s.py", ("INPUT_PATH = 'in.xlsx'\nOUTPUT_PATH = 'out.xlsx'\n" + SCRIPT).encode())
            t0 = time.perf_counter()
            out = box.run_python("s.py", timeout_s=120)
            sandbox_ms.append((time.perf_counter() - t0) * 1000)
            assert out.exit_code == 0, out.stderr_tail
            (work / "in.xlsx").write_bytes(data_in)
            (work / "s.py").write_text(
                f"INPUT_PATH = {str(work / 'in.xlsx')!r}\nOUTPUT_PATH = {str(work / 'out.xlsx')!r}\n" + SCRIPT
            )
            t0 = time.perf_counter()
            subprocess.run([sys.executable, str(work / "s.py")], check=True, capture_output=True)
            host_ms.append((time.perf_counter() - t0) * 1000)
    finally:
        rt.destroy(handle)
        rt.close()
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    ratios = [s / h for s, h in zip(sandbox_ms, host_ms, strict=True)]
    return {
        "tasks": len(records),
        "sandbox_p50_ms": statistics.median(sandbox_ms),
        "host_p50_ms": statistics.median(host_ms),
        "ratio_p50": statistics.median(ratios),
        "ratio_total": sum(sandbox_ms) / sum(host_ms),
    }


# -- runc vs runsc, side by side (``--runtimes runc,runsc``) --------------------------------------

#: A rollout's host-side name for each runtime: runc is the engine default ("").
_RUNTIME_ARG = {"runc": ""}
#: A runtime named ``<runtime>-fresh`` is that runtime with container recycling off.
_FRESH = "-fresh"


def _base_runtime(name: str) -> str:
    """The OCI runtime of a ``--runtimes`` entry (``runsc-fresh`` -> ``runsc``)."""
    return name.removesuffix(_FRESH)


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its live children (the host and its
    grader workers)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            t = p.cpu_times()
            total += t.user + t.system
    return total


def _container_start(runtimes: list[str], n: int) -> dict[str, list[float]]:
    """Per runtime: ``docker run true`` (create, start, exit, remove) and a rollout container's
    creation up to its runner's hello (``DockerRuntime.create``: openpyxl preimported); in that
    container, 3 times each: a file read sent the moment an execution answered (what grading
    does) and an execution sent the moment one answered (a back-to-back session); then its
    removal; a reset of the container for its tenant's next execution (recycling) after each;
    alternating runtimes."""
    client = docker.from_env()
    kinds = ("run_true", "to_hello", "read_after_exec", "exec_after_exec", "reset")
    out: dict[str, list[float]] = {f"{rt}/{k}": [] for rt in runtimes for k in kinds}
    state = tempfile.mkdtemp(prefix="so-bench-rt-", dir="/tmp")
    rt_obj = DockerRuntime(
        RuntimeConfig(host_id=f"benchrt-{uuid.uuid4().hex[:6]}", state_dir=state, pool_size=0)
    )
    try:
        for i in range(n):
            for rt in runtimes if i % 2 == 0 else runtimes[::-1]:
                kw = {"runtime": _RUNTIME_ARG.get(rt, rt)} if _RUNTIME_ARG.get(rt, rt) else {}
                t0 = time.perf_counter()
                c = client.containers.run(DEFAULT_IMAGE, ["true"], detach=True, network_mode="none", **kw)
                c.wait()
                c.remove(force=True)
                out[f"{rt}/run_true"].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                handle = rt_obj.create(ContainerSpec(runtime=_RUNTIME_ARG.get(rt, rt)))
                out[f"{rt}/to_hello"].append((time.perf_counter() - t0) * 1000)
                box = rt_obj.lease(handle, f"bench/{uuid.uuid4().hex}")
                box.write_file("w.py", b"open('out.txt', 'w').write('x')\n")
                for _ in range(3):
                    time.sleep(0.3)  # idle: the runner's next child is ready (eager or idle fork)
                    box.run_python("w.py", timeout_s=60)
                    t0 = time.perf_counter()
                    box.read_file("out.txt", max_bytes=16)
                    out[f"{rt}/read_after_exec"].append((time.perf_counter() - t0) * 1000)
                    time.sleep(0.3)
                    box.run_python("w.py", timeout_s=60)
                    t0 = time.perf_counter()
                    box.run_python("w.py", timeout_s=60)
                    out[f"{rt}/exec_after_exec"].append((time.perf_counter() - t0) * 1000)
                    t0 = time.perf_counter()
                    rt_obj.reset(handle)  # recycling: execution end -> ready again, verified
                    out[f"{rt}/reset"].append((time.perf_counter() - t0) * 1000)
                    box = rt_obj.lease(handle, f"bench/{uuid.uuid4().hex}")
                    box.write_file("w.py", b"open('out.txt', 'w').write('x')\n")
                rt_obj.destroy(handle)
    finally:
        rt_obj.close()
        shutil.rmtree(state, ignore_errors=True)
    return out


def _rollout_kinds(task, grading) -> dict[str, tuple[str, RolloutRequest]]:
    """The rollouts compared: (provider, request template) per kind."""
    return {
        "first": ("first", codegen_request(task, grading)),
        "codegen": ("code", codegen_request(task, grading)),
        # A script that fails: codegen_multi runs it, gets the error back, tries again (4 turns).
        "multi": (
            "fail",
            dataclasses.replace(
                codegen_request(task, grading),
                agent="codegen_multi",
                limits=Limits(wall_time_s=120, exec_timeout_s=30, max_turns=4),
            ),
        ),
    }


def compare_runtimes(runtimes: list[str], waves: int, starts: int) -> int:
    """runc vs runsc (or any registered runtimes) in one run, every figure alternating between
    them: container start, rollout start -> first instruction at c=1 and c=8 (warm pool), a
    SpreadsheetBench codegen rollout's wall time at c=1 and c=8 (warm pool), a multi-turn
    (``codegen_multi``, 4 turns) rollout at c=1, and the CPU per codegen rollout at c=8 (the host
    process tree, and the whole machine from ``/proc/stat``, refills of the warm pool included)."""
    print(f"== runtimes side by side: {', '.join(runtimes)} (uptime: {_uptime()}) ==")
    rows: dict[str, dict[str, float]] = {}
    bases = list(dict.fromkeys(_base_runtime(rt) for rt in runtimes))
    starts_ms = _container_start(bases, starts)
    for rt in runtimes:
        base = _base_runtime(rt)
        for label, kind in (
            ("container start: docker run true, p50 ms", "run_true"),
            ("container start: create -> runner hello, p50 ms", "to_hello"),
            ("a file read sent as an execution answers, p50 ms", "read_after_exec"),
            ("an execution sent as one answers, p50 ms", "exec_after_exec"),
            ("reset: execution end -> ready again, verified, p50 ms", "reset"),
        ):
            rows.setdefault(label, {})[rt] = pct(starts_ms[f"{base}/{kind}"], 50)
    print(f"  (container starts done; uptime: {_uptime()})")
    sample = SpreadsheetBenchData(SAMPLE_ROOT)
    task, grading = build_task(sample.task("32255"))
    kinds = _rollout_kinds(task, grading)
    with contextlib.ExitStack() as stack:
        first_url = stack.enter_context(model_server(f"```python\n{FIRST}```"))
        code_url = stack.enter_context(model_server(f"```python\n{SCRIPT}```"))
        fail_url = stack.enter_context(model_server(f"```python\n{SCRIPT}raise SystemExit('not yet')\n```"))
        hosts = {}
        for rt in runtimes:
            extra = [
                "--provider", f"first=openai_compatible,base_url={first_url},max_retries=0",
                "--provider", f"code=openai_compatible,base_url={code_url},max_retries=0",
                "--provider", f"fail=openai_compatible,base_url={fail_url},max_retries=0",
            ]  # fmt: skip
            base = _base_runtime(rt)
            if _RUNTIME_ARG.get(base, base):
                extra += ["--runtime", _RUNTIME_ARG.get(base, base)]
            if rt.endswith(_FRESH):  # recycling off: a fresh container per rollout (before issue 47)
                extra += ["--reuse-max-executions", "0"]
            hosts[rt] = stack.enter_context(host(first_url, 8, host_id=f"bench-{rt}", extra=extra))
        for rt in runtimes:  # channel set-up and first-use imports are not what we measure
            _, client, _ = hosts[rt]
            for kind in ("first", "codegen", "multi"):
                _one(client, *kinds[kind])
        for concurrency in (1, 8):
            for kind, label in (("first", "start -> first instruction"), ("codegen", "codegen rollout wall")):
                res = _alternate(
                    hosts, runtimes, kinds[kind], concurrency, waves * (4 if concurrency == 1 else 1)
                )
                for rt in runtimes:
                    key = "first_ms" if kind == "first" else "wall_ms"
                    for q in (50, 90):
                        rows.setdefault(f"{label}, c={concurrency}, p{q} ms", {})[rt] = pct(res[rt][key], q)
                    if kind == "first":
                        rows.setdefault(f"{label} excl. model, c={concurrency}, p50 ms", {})[rt] = pct(
                            [f - m for f, m in zip(res[rt]["first_ms"], res[rt]["model_ms"], strict=True)], 50
                        )
                print(f"  ({label} c={concurrency} done; uptime: {_uptime()})")
        res = _alternate(hosts, runtimes, kinds["multi"], 1, max(4, waves))
        for rt in runtimes:
            rows.setdefault("multi-turn rollout wall (4 executions), c=1, p50 ms", {})[rt] = pct(
                res[rt]["wall_ms"], 50
            )
        rate = _sustained(hosts, runtimes, kinds["codegen"], 15.0 * max(1, waves // 2))
        for rt in runtimes:
            rows.setdefault("codegen rollouts per minute, c=8 sustained", {})[rt] = rate[rt]
        print(f"  (sustained rate done; uptime: {_uptime()})")
        cpu = _cpu_per_rollout(hosts, runtimes, kinds["codegen"], waves)
        for rt in runtimes:
            rows.setdefault("CPU per codegen rollout, host process tree, ms", {})[rt] = cpu[rt][0]
            rows.setdefault("CPU per codegen rollout, whole machine, ms", {})[rt] = cpu[rt][1]
    _print_table(rows, runtimes)
    print(f"  (uptime at the end: {_uptime()})")
    return 0


def _uptime() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def _one(client: SandboxClient, provider: str, template: RolloutRequest) -> dict[str, float]:
    req = dataclasses.replace(
        template,
        rollout_id=f"bench/{uuid.uuid4().hex}",
        model=ModelSpec(provider=provider, model="m"),
    )
    t0 = time.time_ns()
    row = client.run(req, timeout_s=180)
    wall = (time.time_ns() - t0) / 1e6
    assert row.infra_error is None, row.infra_error
    out = {"wall_ms": wall, "model_ms": row.timings_s.get("model", 0.0) * 1000}
    if provider == "first":
        out["first_ms"] = (int(row.trace.executions[0].stdout_tail.split()[0]) - t0) / 1e6
    return out


def _alternate(
    hosts: dict, runtimes: list[str], kind: tuple[str, RolloutRequest], concurrency: int, waves: int
) -> dict[str, dict[str, list[float]]]:
    """``waves`` waves of ``concurrency`` rollouts per runtime, the runtimes alternating wave by
    wave (which goes first too), each wave started when every host's warm pool is full (no
    refill of one runtime's containers overlaps the other's wave)."""
    res: dict[str, dict[str, list[float]]] = {rt: {} for rt in runtimes}
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for w in range(waves):
            for rt in runtimes if w % 2 == 0 else runtimes[::-1]:
                _, client, _ = hosts[rt]
                _wait_all_idle(hosts)
                for one in pool.map(lambda _i, c=client: _one(c, *kind), range(concurrency)):
                    for k, v in one.items():
                        res[rt].setdefault(k, []).append(v)
    return res


def _wait_all_idle(hosts: dict) -> None:
    """Every host's warm pool full again: no runtime's refills run during another's wave."""
    for _, client, _ in hosts.values():
        _wait_idle(client, 8)


def _sustained(
    hosts: dict, runtimes: list[str], kind: tuple[str, RolloutRequest], seconds: float
) -> dict[str, float]:
    """Rollouts per minute with 8 clients each starting its next rollout the moment one ends,
    for ``seconds`` per runtime (one after the other, from a full warm pool): what a training
    run's steady state gets."""
    out = {}
    for rt in runtimes:
        _, client, _ = hosts[rt]
        _wait_all_idle(hosts)
        end = time.monotonic() + seconds
        done = [0] * 8

        def loop(i: int, c: SandboxClient = client, end: float = end, done: list[int] = done) -> None:
            while time.monotonic() < end:
                _one(c, *kind)
                done[i] += 1

        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(loop, range(8)))
        out[rt] = sum(done) / (time.monotonic() - t0) * 60
    return out


def _cpu_per_rollout(
    hosts: dict, runtimes: list[str], kind: tuple[str, RolloutRequest], waves: int
) -> dict[str, tuple[float, float]]:
    """(host process tree, whole machine) CPU ms per rollout: waves of 8 from a full warm pool
    until the pool is full again (its refill is the rollouts' cost), runtimes alternating."""
    acc = {rt: [0.0, 0.0, 0] for rt in runtimes}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for w in range(waves):
            for rt in runtimes if w % 2 == 0 else runtimes[::-1]:
                proc, client, _ = hosts[rt]
                _wait_all_idle(hosts)
                busy0, _ = _busy_jiffies()
                tree0 = _tree_cpu_s(proc.pid)
                list(pool.map(lambda _i, c=client: _one(c, *kind), range(8)))
                _wait_idle(client, 8)
                time.sleep(1.0)  # the used containers' removal (deferred) finishes
                acc[rt][0] += _tree_cpu_s(proc.pid) - tree0
                acc[rt][1] += (_busy_jiffies()[0] - busy0) / _HZ
                acc[rt][2] += 8
    return {rt: (a[0] / a[2] * 1000, a[1] / a[2] * 1000) for rt, a in acc.items()}


def _print_table(rows: dict[str, dict[str, float]], runtimes: list[str]) -> None:
    base = runtimes[0]
    ratio_heads = " | ".join(f"{rt} / {base}" for rt in runtimes[1:])
    print(f"| figure | {' | '.join(runtimes)} | {ratio_heads} |")
    print("|---" * (2 * len(runtimes)) + "|")
    for name, vals in rows.items():
        ratios = " | ".join(f"{vals[rt] / vals[base]:.2f}x" if vals[base] else "-" for rt in runtimes[1:])
        print(f"| {name} | {' | '.join(f'{vals[rt]:.1f}' for rt in runtimes)} | {ratios} |")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--waves", type=int, default=6, help="waves of 8 concurrent rollouts")
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--rpcs", type=int, default=200, help="rollouts for the gRPC overhead")
    parser.add_argument(
        "--package-only", action="store_true", help="only the skill package figures (section 5)"
    )
    parser.add_argument("--package-rollouts", type=int, default=40, help="rollouts of each kind in section 5")
    parser.add_argument(
        "--runtimes",
        default="",
        help="only runc vs runsc side by side (comma-separated registered runtimes, the first the base; "
        "<runtime>-fresh: that runtime with container recycling off)",
    )
    parser.add_argument("--starts", type=int, default=10, help="container starts per runtime (--runtimes)")
    args = parser.parse_args()
    if args.runtimes:
        return compare_runtimes([r for r in args.runtimes.split(",") if r], args.waves, args.starts)
    if args.package_only:
        return packages(args.package_rollouts)
    print("== cold container (docker SDK) ==")
    for k, v in cold_docker(10).items():
        print(f"  {k:32s} {v:9.2f}")
    for concurrency in (1, 8):
        print(f"== rollout start -> first instruction, concurrency {concurrency} ==")
        for k, v in first_instruction(args.waves, concurrency).items():
            print(f"  {k:32s} {v:9.2f}")
    print("== gRPC overhead per rollout, 200 KB in, the trace out ==")
    for k, v in grpc_overhead(args.rpcs).items():
        print(f"  {k:32s} {v:9.2f}")
    print("== gRPC overhead per rollout, a 1-byte skill (the floor) ==")
    for k, v in grpc_overhead(args.rpcs, in_bytes=1).items():
        print(f"  {k:32s} {v:9.2f}")
    print(f"== same script on {args.tasks} real tasks: sandbox vs bare host subprocess ==")
    for k, v in same_script(args.tasks).items():
        print(f"  {k:32s} {v:9.3f}")
    return packages(args.package_rollouts)


def packages(n: int) -> int:
    print("== skill package, 50 files / 2 MiB: bytes sent, gRPC overhead vs its SKILL.md alone ==")
    for k, v in package_wire(n).items():
        print(f"  {k:40s} {v:12.2f}")
    print("== skill package: rollout start -> first instruction, with and without, concurrency 1 ==")
    for k, v in package_first_instruction(n).items():
        print(f"  {k:40s} {v:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
