"""``skillopt ui``: the WebUI to configure, launch, stop, resume and watch runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from skillopt.errors import ConfigError

__all__ = ["register"]


_DEFAULT_RUNS = "runs"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ui",
        help="the WebUI: configure, launch, stop, resume and watch runs in the browser",
        description=(
            "Serve the WebUI over the run directories in --runs-dir: the runs list, a new-run form "
            "(validated by the config system, with a preflight), live progress pushed over server-sent "
            "events, steps, rollouts, skill diffs, Stop/Resume/Eval. Runs are `skillopt train` started "
            "as a child, so a run from the page and one from the terminal are the same thing.\n"
            "Listens on 127.0.0.1 by default. Any other address needs a token (--token-file or "
            "SKILLOPT_UI_TOKEN); the browser then logs in once at /login. Examples:\n"
            "  skillopt ui                                  # http://127.0.0.1:8765, runs in ./runs\n"
            "  skillopt ui --port 9000 --runs-dir /data/runs\n"
            "  skillopt ui --host 0.0.0.0 --token-file ~/.skillopt-ui-token"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 = any free port)")
    p.add_argument(
        "--runs-dir",
        default=_DEFAULT_RUNS,
        help="directory of run directories (default ./runs, created when missing; another one must exist)",
    )
    p.add_argument("--token-file", help="file holding the access token (or set SKILLOPT_UI_TOKEN)")
    p.set_defaults(func=run)


def _token(args: argparse.Namespace) -> str | None:
    if args.token_file:
        try:
            token = Path(args.token_file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(f"--token-file {args.token_file}: {exc.strerror}") from None
        if len(token) < 16:
            raise ConfigError(f"--token-file {args.token_file}: the token must have at least 16 characters")
        return token
    token = os.environ.get("SKILLOPT_UI_TOKEN", "").strip()
    if token and len(token) < 16:
        raise ConfigError("SKILLOPT_UI_TOKEN must have at least 16 characters")
    return token or None


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from controller.webui.app import create_app
    except ModuleNotFoundError as exc:
        print(
            f"skillopt ui: {exc.name} is missing; install the WebUI: pip install -e '.[webui]'",
            file=sys.stderr,
        )
        return 2
    from controller.webui.security import check_bind
    from skillopt.logs import configure_logging

    try:
        token = _token(args)
        check_bind(args.host, token)
    except ConfigError as exc:
        print(f"skillopt ui: {exc.message}", file=sys.stderr)
        return 2
    runs_dir = Path(args.runs_dir).expanduser().resolve()
    if args.runs_dir != _DEFAULT_RUNS and not runs_dir.is_dir():
        # A typo must not silently serve an empty new directory; the default ./runs is where
        # `skillopt train` writes, so it may be created.
        print(
            f"skillopt ui: --runs-dir {args.runs_dir} is not a directory; give the directory your runs "
            f"are in, or create it first (mkdir -p {args.runs_dir})",
            file=sys.stderr,
        )
        return 2
    configure_logging(json=True, level="info")
    app = create_app(runs_dir, token=token, bind_host=args.host)
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=2,
        lifespan="off",
    )
    server = uvicorn.Server(config)

    # Say where it listens once the socket is bound (port 0 = a free one): tests wait for it.
    original = server.startup

    async def startup(sockets=None) -> None:
        await original(sockets=sockets)
        for s in server.servers:
            for sock in s.sockets:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                print(
                    f"skillopt ui: serving {runs_dir} on http://{shown}:{port}/"
                    + (" (token required: log in at /login)" if token else ""),
                    file=sys.stderr,
                    flush=True,
                )

    server.startup = startup  # type: ignore[method-assign]  # uvicorn has no hook for "bound": wrap its step
    server.run()
    return 0
