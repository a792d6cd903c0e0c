"""The shape of the house, checked: no import cycle between the project's modules, and the
arrows of import point one way (``controller → sandbox → skillopt``; ``skillopt`` imports
neither, ``sandbox`` never imports ``controller``).

Every import counts, also one inside a function or under ``TYPE_CHECKING``: each is a
dependency a reader has to follow, and a circle of them is one definition in the wrong file.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("skillopt", "sandbox", "controller")
GENERATED = ("sandbox/api/v1",)


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (REPO / pkg).rglob("*.py"):
            rel = path.relative_to(REPO)
            if any(str(rel).startswith(g) for g in GENERATED):
                continue
            name = ".".join(rel.with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (a package's ``__init__`` for names it exports)."""
    found: set[str] = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join([*parts[:keep], *([node.module] if node.module else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_project_is_part_of_an_import_cycle():
    cycles = _cycles(_graph())
    assert cycles == [], (
        "import cycles (move the shared definition into a module both import):\n"
        + "\n".join(" <-> ".join(c) for c in cycles)
    )


def test_every_folder_of_code_is_a_regular_package():
    """Every folder of the project's Python code has an ``__init__.py``. A folder without one is
    still importable (a namespace package), but by accident: tools that look for packages skip
    it, and nothing says what it holds. The exceptions are data: the simulation's scripts, which
    run inside containers and are never imported."""
    folders = {p.parent for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    missing = sorted(
        str(f.relative_to(REPO))
        for f in folders
        if not (f / "__init__.py").exists()
        and "simulation" not in f.relative_to(REPO).parts
        and not any(str(f.relative_to(REPO)).startswith(g) for g in GENERATED)
    )
    assert missing == [], f"add an __init__.py with a docstring saying what the package is: {missing}"


#: Modules that still define their own ``MiB`` instead of importing ``skillopt.units.MiB``,
#: each a debt (the list may only shrink).
OWN_MIB: set[str] = set()


def test_mib_is_defined_once():
    """``MiB`` is :mod:`skillopt.units`'s; a module assigning its own (``MiB = 1024 * 1024``)
    is one more copy to keep equal."""
    found = set()
    for name, path in _modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if any(isinstance(t, ast.Name) and t.id.lstrip("_") == "MiB" for t in targets):
                found.add(name)
    assert found == {"skillopt.units", *OWN_MIB}, "import MiB from skillopt.units (drop a paid debt)"


#: The most lines a module of the project may have, and a function (or method) of it: past
#: them a reader loses the thread (issue 48; the style guide keeps a function to one screen).
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_modules_and_functions_stay_readable_in_size():
    """No module over :data:`MAX_MODULE_LINES` lines, no function over
    :data:`MAX_FUNCTION_LINES` (from its ``def`` line to its last, docstring included)."""
    wrong = []
    for name, path in _modules().items():
        text = path.read_text(encoding="utf-8")
        lines = text.count("\n")
        if lines > MAX_MODULE_LINES:
            wrong.append(f"{name}: {lines} lines (split it by responsibility)")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    wrong.append(f"{name}.{node.name} (line {node.lineno}): {length} lines")
    assert wrong == [], "\n".join(wrong)


#: Modules split into private parts (``_rules.py``, ``_read.py``, ...) behind one face, the
#: package's ``__init__``: the rest of the project imports the face, so the parts can move.
FACES = ("skillopt.config.schema", "skillopt.skill.edits", "skillopt.skill.package")


def test_a_module_split_into_parts_is_reached_through_its_face():
    graph = _graph()
    wrong = sorted(
        f"{name} imports {target}"
        for face in FACES
        for name, targets in graph.items()
        if name != face and not name.startswith(face + ".")
        for target in targets
        if target.startswith(face + ".")
    )
    assert wrong == [], "import these names from the package itself:\n" + "\n".join(wrong)


def test_imports_point_one_way():
    graph = _graph()
    allowed = {"skillopt": {"skillopt"}, "sandbox": {"sandbox", "skillopt"}, "controller": set(PACKAGES)}
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in graph.items()
        for target in targets
        if target.split(".")[0] not in allowed[name.split(".")[0]]
    )
    assert wrong == []


#: The only modules outside ``sandbox/runtime/docker/`` that may import the docker SDK or that
#: package: the composition roots, which build a ``DockerRuntime`` or ask the local engine.
DOCKER_COMPOSITION_ROOTS = {
    "sandbox.server.serve": "builds the service's DockerRuntime and gateway network",
    "sandbox.runtime.fresh": "builds a DockerRuntime for grading without a service",
    "controller.commands.sandbox": "`skillopt sandbox exec` builds a DockerRuntime",
    "controller.embedded": "sweeps what a lost embedded service left on the local engine",
    "controller.preflight": "asks the local engine before an embedded run starts one",
}
DOCKER_PACKAGE = "sandbox.runtime.docker"


def _absolute_imports(path: Path) -> set[str]:
    """The full dotted names of the absolute imports in ``path``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module)
    return found


def _sdk_imports(path: Path) -> set[str]:
    """The top-level names of the absolute imports in ``path`` (``docker`` is the SDK)."""
    return {name.split(".")[0] for name in _absolute_imports(path)}


def test_docker_stays_inside_its_runtime_package():
    """The runtime contract (``sandbox/runtime/base.py``) is the boundary: the pool, the service
    and the sessions use only it, and everything Docker is in ``sandbox/runtime/docker/``."""
    graph = _graph()
    wrong = []
    for name, path in _modules().items():
        if (
            name == DOCKER_PACKAGE
            or name.startswith(DOCKER_PACKAGE + ".")
            or name in DOCKER_COMPOSITION_ROOTS
        ):
            continue
        if "docker" in _sdk_imports(path):
            wrong.append(f"{name} imports the docker SDK")
        wrong += [f"{name} imports {t}" for t in sorted(graph[name]) if t.startswith(DOCKER_PACKAGE)]
    assert wrong == [], "use the contract in sandbox/runtime/base.py instead:\n" + "\n".join(wrong)


def test_the_runner_package_imports_nothing_of_the_project():
    """The runner runs inside every container on the image's Python: stdlib only."""
    graph = _graph()
    runner = "sandbox.runtime.runner"
    wrong = sorted(
        f"{name} imports {t}"
        for name, targets in graph.items()
        if name.startswith(runner)
        for t in targets
        if not t.startswith(runner)
    )
    assert wrong == []


#: What the gate package may import from the rest of the project. It decides on numbers: the
#: trainer's gate segment takes the rollouts and the run directory, and calls it.
GATE_MAY_IMPORT = {
    "skillopt.errors": "ConfigError and SkillOptError",
    "skillopt.types": "SkillVersion, whose tree hash keys the selection cache (skill_hash: a cache from before)",
    "skillopt.skill.document": "the protected regions that semantic density leaves out",
    "skillopt.config.schema": "EvaluationConfig, for the type checker only (SelectionScoring's settings)",
}
GATE = "skillopt.gate"


def test_the_gate_decides_on_numbers_and_is_reached_through_its_face():
    """``skillopt.gate`` imports nothing that runs rollouts, calls models or writes files, and
    the rest of the project imports its face (``skillopt/gate/__init__.py``). The one exception
    is the config, which parses ``evaluation.gate_mode`` into ``gate.modes.GateMode``: the face
    would close a circle through ``gate.selection``, so ``gate.modes`` imports nothing at all."""
    graph = _graph()
    inside = {name for name in graph if name == GATE or name.startswith(GATE + ".")}
    wrong = sorted(
        f"{name} imports {t}"
        for name in inside
        for t in graph[name]
        if t not in inside and t not in GATE_MAY_IMPORT
    )
    wrong += [f"{GATE}.modes imports {t}" for t in sorted(graph[f"{GATE}.modes"])]
    wrong += sorted(
        f"{name} imports {t}"
        for name, targets in graph.items()
        if name not in inside
        for t in targets
        if t in inside and t != GATE and (name, t) != ("skillopt.config.schema._evaluation", f"{GATE}.modes")
    )
    assert wrong == [], "\n".join(wrong)


#: Public class names defined in more than one module today, each a debt to pay by renaming
#: one of them (the list may only shrink). Two meanings under one name send a reader to the
#: wrong file (issue 48: two ``SessionSandbox``, ``Sweep`` defined twice).
SHARED_CLASS_NAMES = {
    "ExecResult": {"controller.client.sessions", "skillopt.testing.fixtures.spreadsheetbench.verify"},
    "HostState": {"controller.fleet.hosts", "sandbox.observability.metrics"},
    "Message": {"sandbox.runtime.runner.protocol", "skillopt.types"},
    "Refused": {"sandbox.gateway.connection", "skillopt.agents.corpus_tools_program"},
    "RunInfo": {"controller.rundir.reader", "skillopt.tracking._base"},
    "Session": {"controller.session", "sandbox.service.sessions"},
}


def test_a_public_class_name_has_one_definition():
    """A public (module-level) class name is defined in one module: re-export it elsewhere,
    never define it again."""
    where: dict[str, set[str]] = {}
    for name, path in _modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                where.setdefault(node.name, set()).add(name)
    shared = {cls: modules for cls, modules in where.items() if len(modules) > 1}
    assert shared == SHARED_CLASS_NAMES, (
        "a class name defined twice: rename one (or, if one was renamed, drop it from "
        f"SHARED_CLASS_NAMES):\n{shared}"
    )


def _private_imports(path: Path, package: str) -> list[str]:
    """The ``_``-prefixed names ``path`` imports from modules of ``package`` (and the private
    modules it imports from there)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == package or node.module.startswith(package + "."):
                found += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_")]
                if any(p.startswith("_") for p in node.module.split(".")):
                    found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [
                a.name
                for a in node.names
                if a.name.startswith(package + ".") and any(p.startswith("_") for p in a.name.split("."))
            ]
    return found


def test_the_webui_uses_the_commands_public_entries_only():
    """The WebUI launches, resumes and evaluates through the CLI's own parser and loaders
    (``controller.cli.parse_args``, ``controller.commands.train.load``, ``...eval.load``): it
    imports nothing private from ``controller.commands``, so a command's internals can change
    without a second, hand-built caller drifting from them."""
    wrong = [
        f"{name} imports {target}"
        for name, path in _modules().items()
        if name.startswith("controller.webui")
        for target in _private_imports(path, "controller.commands")
    ]
    assert wrong == []


#: The readers of run directories: they read every file through the run directory's records
#: (``skillopt.trainer.rundir``), never parsing its JSON themselves.
RUN_DIRECTORY_READERS = (
    "controller.rundir.reader",
    "controller.rundir.status",
    "controller.rundir.damage",
    "controller.rundir.runconfig",
    "controller.commands.runs",
    "controller.webui.compare",
)


def _json_parses(path: Path) -> list[str]:
    """The ``json.load``/``json.loads`` calls in ``path`` (as ``json.loads`` or a bare name
    imported from json)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bare = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "json"
        for a in node.names
        if a.name in ("load", "loads")
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr in ("load", "loads")
            and getattr(f.value, "id", "") == "json"
        ):
            found.append(f"json.{f.attr} (line {node.lineno})")
        elif isinstance(f, ast.Name) and f.id in bare:
            found.append(f"{f.id} (line {node.lineno})")
    return found


def test_run_directory_readers_read_through_its_records():
    """One schema for the writer and every reader: a reader that parsed a file's JSON itself
    would re-guess the writer (the ``.get("…")`` walks the reader had) and drift from it."""
    modules = _modules()
    wrong = [
        f"{name} parses JSON: {call}"
        for name in RUN_DIRECTORY_READERS
        for call in _json_parses(modules[name])
    ]
    if '.get("' in modules["controller.rundir.reader"].read_text(encoding="utf-8"):
        wrong.append("controller.rundir.reader walks a dict with .get(...)")
    assert wrong == [], "read the file through its record in skillopt.trainer.rundir:\n" + "\n".join(wrong)


def test_the_skill_version_sits_below_everything():
    """``skillopt.types`` (with :class:`~skillopt.types.SkillVersion`, the value every holder of
    a skill takes) imports the standard library alone: the trainer, the wire, the sandbox and
    the controller all import it, and it imports none of them."""
    import sys

    path = _modules()["skillopt.types"]
    outside = sorted(m for m in _sdk_imports(path) if m not in sys.stdlib_module_names and m != "__future__")
    assert outside == [] and _graph()["skillopt.types"] == set()


#: The modules that may import the packed text (``skillopt.skill.packed``): the format the
#: optimizer model reads and writes is made and read at the trainer's edge with that model,
#: and where the run stores it. Rollouts, agents, the wire, the sandbox and the controller see
#: only ``SkillVersion``.
PACKED_TEXT_EDGE = {
    "skillopt.skill.package_edits": "the optimizer's edits apply to a version's text",
    "skillopt.trainer.context": "owns the run's frame (the codec between versions and texts)",
    "skillopt.trainer.state": "stores the current and best versions as their text",
    "skillopt.trainer.rundir.store": "writes skills/skill_vNNNN.md, the text of each version",
    "skillopt.trainer.segments.propose": "the rewrite modes rewrite SKILL.md within the text",
    "skillopt.trainer.segments.finish": "two texts that differ by an empty block behave alike",
    "skillopt.testing.package_sim": "the simulated optimizer reads the text as a model would",
}


def test_the_packed_text_stays_at_the_optimizer_edge():
    packed = "skillopt.skill.packed"
    users = {name for name, targets in _graph().items() if packed in targets}
    assert users - set(PACKED_TEXT_EDGE) == set(), "take a SkillVersion instead of its packed text"
    assert set(PACKED_TEXT_EDGE) - users == set(), "a module left the edge: drop it from PACKED_TEXT_EDGE"


def test_no_signature_takes_a_skill_as_text_or_version():
    """One shape per version: a union of ``str`` and ``SkillVersion`` in a signature (in any
    order, with or without ``None``) means a holder that converts behind its callers' backs."""
    union = re.compile(
        r"\bstr\s*\|\s*(?:None\s*\|\s*)?SkillVersion\b|\bSkillVersion\s*\|\s*(?:None\s*\|\s*)?str\b"
    )
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in _modules().values()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if union.search(line)
    ]
    assert found == []


#: The modules that may import the HTTP server library (Starlette, uvicorn): the listener every
#: HTTP API of a host and of the fleet's front serves with, and the WebUI.
HTTP_SERVER_MODULES = {
    "sandbox.server.fusion_http",
    "sandbox.server.http_protocol",
    "controller.webui.app",
    "controller.commands.ui",
}
#: The standard library's HTTP server and client: test doubles only (``skillopt/testing/``).
STDLIB_HTTP = {"http.server", "http.client", "socketserver"}


def test_one_http_stack():
    """HTTP is served with Starlette on uvicorn from one listener (``fusion_http.HttpApi``: the
    host's API and the fleet's front) and the WebUI, and called with httpx; the model gateway
    parses HTTP with h11 for the reasons in its docstring. The stdlib's HTTP server and client
    are left to the test doubles."""
    wrong = []
    for name, path in _modules().items():
        imports = _absolute_imports(path)
        roots = {i.split(".")[0] for i in imports}
        if roots & {"starlette", "uvicorn"} and name not in HTTP_SERVER_MODULES:
            wrong.append(f"{name} imports {sorted(roots & {'starlette', 'uvicorn'})}")
        stdlib = imports & STDLIB_HTTP
        # skillopt.httpbody reads bodies for the scripted model server (a test double) too.
        if stdlib and not name.startswith("skillopt.testing") and name != "skillopt.httpbody":
            wrong.append(f"{name} imports {sorted(stdlib)}")
    assert wrong == [], "serve with sandbox.server.fusion_http.HttpApi, call with httpx:\n" + "\n".join(wrong)
