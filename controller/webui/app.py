"""The WebUI application: pages, JSON actions and server-sent event streams.

Composition only: run directories are read with :mod:`controller.rundir.reader`, the new-run
form is validated by the config system (:mod:`controller.webui.forms`), preflight is
:mod:`controller.preflight`, and runs are the CLI started as a child
(:mod:`controller.webui.launch`). Pages are rendered on the server (Jinja2, autoescaped); the
live parts are drawn in the browser by ``static/app.js`` from JSON snapshots pushed over SSE.

Usage::

    app = create_app(runs_dir=Path("runs"))          # then serve it with uvicorn
"""

from __future__ import annotations

import asyncio
import csv
import hmac
import io
import json
import mimetypes
import shutil
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

import structlog
from jinja2 import Environment, FileSystemLoader, Undefined, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from controller.cli import parse_args
from controller.commands import eval as eval_command
from controller.commands import train as train_command
from controller.preflight import Check, preflight
from controller.rundir.lock import clear_stop_request, request_stop
from controller.rundir.notes import parse_tags, read_notes, write_notes
from controller.rundir.reader import RunDir, RunStatus, diff_lines, is_run_dir
from controller.rundir.runconfig import recorded_mode
from controller.webui.compare import MAX_RUNS, compare_runs
from controller.webui.forms import FIELDS, LaunchPlan, config_choices, form_values, plan_launch
from controller.webui.launch import Launcher, eval_args, resume_args, train_args
from controller.webui.security import COOKIE, SecurityMiddleware, session_value
from controller.webui.snapshot import RunsList, run_signature, run_snapshot, runs_signature
from skillopt.config import Config
from skillopt.errors import ConfigError, SkillOptError
from skillopt.gate import format_score
from skillopt.trainer.rundir import ResultRow, layout

__all__ = ["create_app"]

log = structlog.get_logger("skillopt.controller.webui")

HERE = Path(__file__).parent
_SPLITS = ("train", "val", "test", "all")
_TEXT_TYPES = {".json", ".jsonl", ".md", ".txt", ".log", ".py", ".yaml", ".csv"}


class _Error(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


_EXPORT_FIELDS = ("id", "task_type", "hard", "soft", "fail_reason", "phase", "n_turns", "host", "infra_error")


def _rows_export(run: str, rel: str, rows: list[ResultRow], fmt: str) -> Response:
    """A rows table as a download: CSV (the table's columns) or JSONL (the rows whole)."""
    name = f"{run}_{rel.replace('/', '_')}.{fmt}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    if fmt == "jsonl":
        body = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in rows)
        return Response(body, media_type="application/x-ndjson; charset=utf-8", headers=headers)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(_EXPORT_FIELDS)
    for r in rows:
        infra = r.infra_error
        writer.writerow(
            [
                *(getattr(r, k) for k in _EXPORT_FIELDS[:-1]),
                f"{infra.kind}: {infra.message}" if infra is not None else "",
            ]
        )
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=headers)


def _score(value: Any, ci95: Any = None) -> str:
    """``0.625`` or, with its interval, ``0.625 [0.521, 0.719]`` (the CLI's format)."""
    # A field an older or partial record lacks is "-", never a page error.
    if isinstance(value, Undefined) or value is None:
        value = None
    if isinstance(ci95, Undefined):
        ci95 = None
    try:
        return format_score(None if value is None else float(value), ci95)
    except (TypeError, ValueError):
        return "-"


class WebUI:
    """Request handlers over one runs directory."""

    def __init__(
        self, runs_dir: Path, *, token: str | None, poll_s: float = 0.25, keepalive_s: float = 15.0
    ) -> None:
        self.runs_dir = runs_dir.resolve()
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        self.token = token
        self.poll_s = poll_s
        self.keepalive_s = keepalive_s
        self.launcher = Launcher()
        self.runs_list = RunsList(self.runs_dir)
        self.templates = Environment(
            loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"])
        )
        self.templates.filters["score"] = _score

    # -- helpers -----------------------------------------------------------------------------

    def page(self, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        html = self.templates.get_template(name).render(**ctx, runs_dir=str(self.runs_dir))
        return HTMLResponse(html, status_code=status)

    def run(self, name: str) -> RunDir:
        """The run called ``name`` directly under the runs directory (404 otherwise)."""
        if not name or name.startswith(".") or "/" in name or "\\" in name or name in ("..",):
            raise _Error(404, f"no run {name!r}")
        path = self.runs_dir / name
        if not path.is_dir() or path.resolve().parent != self.runs_dir:
            raise _Error(404, f"no run {name!r}")
        if not is_run_dir(path):  # an empty or foreign folder in the runs directory
            raise _Error(
                404, f"{name!r} is a folder in the runs directory but not a run (no run files in it)"
            )
        return RunDir(path)

    @staticmethod
    async def body(request: Request) -> dict[str, Any]:
        try:
            data = await request.json()
        except ValueError:
            raise _Error(400, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise _Error(400, "the body must be a JSON object")
        return data

    def sse(
        self, request: Request, signature: Callable[[], Any], snapshot: Callable[[], Any]
    ) -> StreamingResponse:
        """Push ``snapshot()`` whenever ``signature()`` changes (checked every ``poll_s``)."""

        async def stream() -> AsyncIterator[str]:
            last_sig: Any = object()
            last_body = ""
            last_sent = time.monotonic()
            yield "retry: 1000\n\n"
            while not await request.is_disconnected():
                try:
                    sig = await run_in_threadpool(signature)
                    data = await run_in_threadpool(snapshot) if sig != last_sig else None
                except OSError as exc:  # the run directory went away (deleted): end cleanly
                    log.info("webui.stream_ended", path=request.url.path, reason=str(exc)[:200])
                    yield "event: gone\ndata: {}\n\n"
                    return
                if sig != last_sig:
                    last_sig = sig
                    body = json.dumps(data, default=str)
                    if body != last_body:
                        last_body = body
                        last_sent = time.monotonic()
                        yield f"event: snapshot\ndata: {body}\n\n"
                if time.monotonic() - last_sent > self.keepalive_s:
                    last_sent = time.monotonic()
                    yield ": keepalive\n\n"
                await asyncio.sleep(self.poll_s)

        return StreamingResponse(
            stream(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    # -- login -------------------------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        if self.token is None:
            return RedirectResponse("/", status_code=303)
        given = request.query_params.get("token", "")
        if request.method == "POST":  # a urlencoded form (no multipart parser needed)
            form = parse_qs((await request.body()).decode("utf-8", errors="replace"))
            given = (form.get("token") or [""])[0]
        if given:
            if hmac.compare_digest(given.encode(), self.token.encode()):
                resp = RedirectResponse("/", status_code=303)
                resp.set_cookie(COOKIE, session_value(self.token), httponly=True, samesite="strict", path="/")
                return resp
            return self.page("login.html", 401, error="wrong token")
        return self.page("login.html", error="")

    # -- runs list ---------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        snap = await run_in_threadpool(self.runs_list.snapshot)
        return self.page("runs.html", snapshot=snap)

    async def api_runs(self, request: Request) -> Response:
        return JSONResponse(await run_in_threadpool(self.runs_list.snapshot))

    async def api_notes(self, request: Request) -> Response:
        """Set a run's note and tags, or archive / unarchive it (``{note?, tags?, archived?}``)."""
        run = self.run(request.path_params["name"])
        body = await self.body(request)
        notes = read_notes(run.path)
        changes: dict[str, Any] = {}
        if "note" in body:
            changes["note"] = str(body["note"] or "")
        if "tags" in body:
            changes["tags"] = parse_tags(body["tags"])
        if "archived" in body:
            changes["archived"] = bool(body["archived"])
        notes = replace(notes, **changes)
        await run_in_threadpool(write_notes, run.path, notes)
        return JSONResponse({"ok": True, "notes": notes.to_dict()})

    async def api_delete(self, request: Request) -> Response:
        """Delete a run directory for good; the body must repeat its name (``{confirm: NAME}``)
        and nothing may run in it."""
        run = self.run(request.path_params["name"])
        body = await self.body(request)
        if body.get("confirm") != run.name:
            return JSONResponse(
                {"ok": False, "error": f"to delete {run.name}, send its name as confirm"}, status_code=400
            )
        status = (await run_in_threadpool(run.status)).status
        if status in (RunStatus.RUNNING, RunStatus.STARTING):
            return JSONResponse(
                {"ok": False, "error": f"{run.name} is {status}: stop it before deleting it"}, status_code=409
            )
        await run_in_threadpool(shutil.rmtree, run.path)
        log.info("webui.run_deleted", run=run.name)
        return JSONResponse({"ok": True})

    async def events_runs(self, request: Request) -> Response:
        return self.sse(request, lambda: runs_signature(self.runs_dir), self.runs_list.snapshot)

    # -- new run -----------------------------------------------------------------------------

    async def new(self, request: Request) -> Response:
        choices = await run_in_threadpool(config_choices)
        return self.page("new.html", choices=choices, fields=FIELDS)

    async def api_config(self, request: Request) -> Response:
        choice = {c.id: c for c in config_choices()}.get(request.path_params["cid"])
        if choice is None:
            raise _Error(404, f"no config {request.path_params['cid']!r}")
        try:
            cfg = choice.load()
        except ConfigError as exc:
            raise _Error(400, exc.message) from None
        return JSONResponse({"id": choice.id, "env": choice.env, "values": form_values(cfg)})

    def _plan(self, form: dict[str, Any]) -> tuple[LaunchPlan, Config, list[Check], list[str]]:
        """The form validated, then the command line it launches, loaded by the CLI's own
        parser and loader (so preflight checks the config the run will have), and preflight.

        Raises:
            ConfigError: the form's values, or the CLI's loading, refused (its message).
        """
        existing = {p.name for p in self.runs_dir.iterdir()}
        plan = plan_launch(form, existing=existing)
        args = train_args(plan.choice.config, plan.set_args(), self.runs_dir / plan.name)
        cfg, _ = train_command.load(parse_args(args))
        return plan, cfg, preflight(cfg), args

    async def api_preflight(self, request: Request) -> Response:
        form = await self.body(request)
        try:
            plan, _, checks, args = await run_in_threadpool(self._plan, form)
        except SkillOptError as exc:
            return JSONResponse({"ok": False, "error": exc.message, "checks": []}, status_code=422)
        return JSONResponse(
            {
                "ok": all(c.ok for c in checks),
                "checks": [c.to_dict() for c in checks],
                "name": plan.name,
                "command": "skillopt " + " ".join(args),
            }
        )

    async def api_launch(self, request: Request) -> Response:
        form = await self.body(request)
        try:
            plan, cfg, checks, args = await run_in_threadpool(self._plan, form)
        except SkillOptError as exc:
            return JSONResponse({"ok": False, "error": exc.message, "checks": []}, status_code=422)
        if not all(c.ok for c in checks):
            failed = next(c for c in checks if not c.ok)
            return JSONResponse(
                {
                    "ok": False,
                    "error": f"preflight: {failed.name}: {failed.detail}",
                    "checks": [c.to_dict() for c in checks],
                },
                status_code=409,
            )
        out = self.runs_dir / plan.name
        try:
            out.mkdir()  # claims the name: of two launches with one name, one gets it
        except FileExistsError:
            return JSONResponse(
                {"ok": False, "error": f"a run named {plan.name!r} exists already"}, status_code=409
            )
        pid = await run_in_threadpool(self.launcher.start, out, args, kind="train", env_name=cfg.env.name)
        return JSONResponse({"ok": True, "name": plan.name, "pid": pid, "url": f"/runs/{plan.name}"})

    # -- one run -----------------------------------------------------------------------------

    async def run_page(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        snap = await run_in_threadpool(run_snapshot, run)
        return self.page("run.html", run=run, snapshot=snap, splits=_SPLITS)

    async def api_run(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        return JSONResponse(await run_in_threadpool(run_snapshot, run))

    async def events_run(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        return self.sse(request, lambda: run_signature(run), lambda: run_snapshot(run))

    async def api_stop(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        body = await self.body(request)
        reason = str(body.get("reason") or "stopped from the WebUI")[:300]
        try:
            holder = await run_in_threadpool(request_stop, run.path, reason=reason, by="webui")
        except ConfigError as exc:
            return JSONResponse({"ok": False, "error": exc.message}, status_code=409)
        return JSONResponse({"ok": True, "pid": holder.pid})

    async def api_resume(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        body = await self.body(request)
        info = run.status()
        status = info.status
        if status is RunStatus.DAMAGED and not info.damage.resumable:
            return JSONResponse(
                {
                    "ok": False,
                    "error": f"{run.name} is damaged: {info.damage.headline()}; {info.damage.advice()}",
                },
                status_code=409,
            )
        if status in (RunStatus.RUNNING, RunStatus.STARTING):
            return JSONResponse(
                {"ok": False, "error": f"{run.name} is {status}: nothing to resume"}, status_code=409
            )
        if status is RunStatus.FINISHED:
            return JSONResponse(
                {"ok": False, "error": f"{run.name} finished: nothing to resume"}, status_code=409
            )
        if not run.exists(layout.CONFIG):
            return JSONResponse(
                {"ok": False, "error": f"{run.name} never started training (no config.json): launch it anew"},
                status_code=409,
            )
        overrides = [line.strip() for line in str(body.get("extra") or "").splitlines() if line.strip()]
        # The recorded mode is kept: a simulated run resumes simulated, a real one real.
        recorded = await run_in_threadpool(recorded_mode, run.path)
        simulate = recorded.flag if recorded else "off"
        args = resume_args(run.path, overrides, simulate=simulate)
        try:  # the CLI's own parsing and loading of a run to resume: its messages are the CLI's
            cfg, _ = await run_in_threadpool(train_command.load, parse_args(args))
        except SkillOptError as exc:
            return JSONResponse({"ok": False, "error": exc.message}, status_code=422)
        checks = await run_in_threadpool(preflight, cfg)
        failed = [c for c in checks if not c.ok]
        if failed:
            return JSONResponse(
                {"ok": False, "error": f"preflight: {failed[0].name}: {failed[0].detail}"}, status_code=409
            )
        clear_stop_request(run.path)
        pid = await run_in_threadpool(self.launcher.start, run.path, args, kind="train")
        return JSONResponse({"ok": True, "pid": pid})

    async def api_eval(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        body = await self.body(request)
        skill_rel, split = str(body.get("skill") or ""), str(body.get("split") or "test")
        if split not in _SPLITS:
            return JSONResponse(
                {"ok": False, "error": f"split must be one of {', '.join(_SPLITS)}"}, status_code=422
            )
        if skill_rel not in {rel for _, rel in run.skill_versions()}:
            return JSONResponse(
                {"ok": False, "error": f"{skill_rel!r} is not a skill of this run"}, status_code=422
            )
        if run.config() is None:
            return JSONResponse({"ok": False, "error": "the run has no config.json yet"}, status_code=409)
        stem = Path(skill_rel).stem if not skill_rel.startswith("steps/") else skill_rel.split("/")[1]
        out = run.path / layout.EVALS / f"{split}_{stem}_{time.strftime('%Y%m%d_%H%M%S')}"
        skill = run.resolve(run.skill_package(skill_rel))  # the whole package, where the run wrote one
        if skill is None:  # a listed skill version always resolves; refused rather than assumed
            return JSONResponse(
                {"ok": False, "error": f"{skill_rel!r} is not a skill of this run"}, status_code=422
            )
        # `skillopt eval --run`: the run's own config and mode, read by the CLI as in a terminal.
        args = eval_args(run.path, skill, split, out)
        try:
            cfg, _ = await run_in_threadpool(eval_command.load, parse_args(args))
        except SkillOptError as exc:
            return JSONResponse({"ok": False, "error": exc.message}, status_code=422)
        out.mkdir(parents=True, exist_ok=False)
        pid = await run_in_threadpool(self.launcher.start, out, args, kind="eval", env_name=cfg.env.name)
        return JSONResponse({"ok": True, "pid": pid, "dir": str(out.relative_to(run.path))})

    async def step_page(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        n = int(request.path_params["n"])
        if n not in run.steps():
            raise _Error(404, f"{run.name} has no step {n}")
        step = await run_in_threadpool(run.step, n)
        diff = (
            diff_lines(step["skill_before"] or "", step["candidate"])
            if step["candidate"] is not None
            else None
        )
        return self.page("step.html", run=run, step=step, diff=diff)

    async def rows_page(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        rel = request.query_params.get("dir", "")
        if run.resolve(rel) is None or not run.exists(f"{rel}/results.jsonl"):
            raise _Error(404, f"no rollout directory {rel!r}")
        rows = await run_in_threadpool(run.rows, rel)
        fmt = request.query_params.get("format", "")
        if fmt in ("csv", "jsonl"):
            return _rows_export(run.name, rel, rows, fmt)
        summary = await run_in_threadpool(run.eval_summary, rel)
        return self.page("rows.html", run=run, rel=rel, rows=rows, summary=summary)

    async def eval_page(self, request: Request) -> Response:
        """An eval of the run (``evals/<name>``): its rows page with its summary."""
        run = self.run(request.path_params["name"])
        ev = request.path_params["ev"]
        dirs = run.rollout_dirs(f"{layout.EVALS}/{ev}") if run.resolve(f"{layout.EVALS}/{ev}") else []
        if not dirs:
            raise _Error(404, f"no finished eval {ev!r} in {run.name} (it has no rows yet)")
        return RedirectResponse(f"/runs/{quote(run.name)}/rows?dir={quote(dirs[0])}", status_code=303)

    async def rollout_page(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        rel, item = request.query_params.get("dir", ""), request.query_params.get("id", "")
        found = await run_in_threadpool(run.rollout, rel, item) if run.resolve(rel) else None
        if found is None:
            raise _Error(404, f"no rollout {item!r} in {rel!r}")
        row, files = found
        exchanges: Any = None
        raw = row.trace.notes.get("model_exchanges")
        if raw:
            try:
                exchanges = json.loads(raw)
            except ValueError:
                exchanges = None
        notes = {k: v for k, v in row.trace.notes.items() if k != "model_exchanges"}
        return self.page(
            "rollout.html", run=run, rel=rel, row=row, files=files, exchanges=exchanges, notes=notes
        )

    async def compare_page(self, request: Request) -> Response:
        """``/compare?runs=A,B,...``: two to :data:`MAX_RUNS` runs side by side."""
        names = [n for n in request.query_params.get("runs", "").split(",") if n]
        if not 2 <= len(names) <= MAX_RUNS or len(set(names)) != len(names):
            raise _Error(
                400, f"compare two to {MAX_RUNS} different runs: /compare?runs=NAME,NAME (got {len(names)})"
            )
        runs = [self.run(n) for n in names]
        data = await run_in_threadpool(compare_runs, runs)
        return self.page("compare.html", data=data)

    async def skills_page(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        versions = run.skill_versions()
        rels = [rel for _, rel in versions]
        a = request.query_params.get("a") or (rels[0] if rels else "")
        b = request.query_params.get("b") or (rels[-1] if rels else "")
        full = request.query_params.get("context") == "all"
        if versions and (a not in rels or b not in rels):
            raise _Error(404, "unknown skill version")
        diff = (
            diff_lines(run.text(a) or "", run.text(b) or "", context=10**6 if full else 3) if versions else []
        )
        return self.page("skills.html", run=run, versions=versions, a=a, b=b, diff=diff, full=full)

    async def file(self, request: Request) -> Response:
        run = self.run(request.path_params["name"])
        rel = request.path_params["rel"]
        path = run.resolve(rel)
        if path is None or not path.is_file():
            raise _Error(404, f"no file {rel!r}")
        if path.suffix in _TEXT_TYPES and request.query_params.get("download") != "1":
            text = await run_in_threadpool(run.text, rel)
            return Response(text or "", media_type="text/plain; charset=utf-8")
        media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if media.startswith("text/") or "html" in media or "xml" in media or "svg" in media:
            media = "application/octet-stream"  # never rendered by the browser as a page
        return FileResponse(path, media_type=media, filename=path.name)


def create_app(
    runs_dir: Path, *, token: str | None = None, bind_host: str = "127.0.0.1", poll_s: float = 0.25
) -> Any:
    """The ASGI application serving ``runs_dir``, behind :class:`SecurityMiddleware`."""
    ui = WebUI(runs_dir, token=token, poll_s=poll_s)

    async def errors(request: Request, exc: Exception) -> Response:
        if isinstance(exc, _Error):
            status, message = exc.status, exc.message
        elif isinstance(exc, SkillOptError):
            status, message = 400, exc.message
        elif isinstance(exc, HTTPException):  # Starlette's own: an unknown route, a wrong method
            status = exc.status_code
            message = (
                f"there is no page at {request.url.path}"
                if status == 404
                else f"{request.method} is not allowed here"
                if status == 405
                else str(exc.detail)
            )
        else:
            raise exc
        if "text/html" in request.headers.get("accept", ""):
            return ui.page("error.html", status, message=message)
        return JSONResponse({"error": message}, status_code=status)

    routes = [
        Route("/", ui.index),
        Route("/login", ui.login, methods=["GET", "POST"]),
        Route("/new", ui.new),
        Route("/api/runs", ui.api_runs),
        Route("/api/configs/{cid}", ui.api_config),
        Route("/api/preflight", ui.api_preflight, methods=["POST"]),
        Route("/api/launch", ui.api_launch, methods=["POST"]),
        Route("/api/runs/{name}", ui.api_run),
        Route("/api/runs/{name}/stop", ui.api_stop, methods=["POST"]),
        Route("/api/runs/{name}/resume", ui.api_resume, methods=["POST"]),
        Route("/api/runs/{name}/eval", ui.api_eval, methods=["POST"]),
        Route("/api/runs/{name}/notes", ui.api_notes, methods=["POST"]),
        Route("/api/runs/{name}/delete", ui.api_delete, methods=["POST"]),
        Route("/events/runs", ui.events_runs),
        Route("/events/runs/{name}", ui.events_run),
        Route("/compare", ui.compare_page),
        Route("/runs/{name}", ui.run_page),
        Route("/runs/{name}/steps/{n:int}", ui.step_page),
        Route("/runs/{name}/rows", ui.rows_page),
        Route("/runs/{name}/evals/{ev}", ui.eval_page),
        Route("/runs/{name}/rollout", ui.rollout_page),
        Route("/runs/{name}/skills", ui.skills_page),
        Route("/runs/{name}/files/{rel:path}", ui.file),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes, exception_handlers={_Error: errors, SkillOptError: errors, HTTPException: errors}
    )
    app.state.ui = ui
    return SecurityMiddleware(app, token=token, bind_host=bind_host)
