"""Scripted model server: the public entry point and its command line.

The implementation lives in :mod:`skillopt.testing.scripted`; this module re-exports it and
runs it as a process::

    python -m skillopt.testing.scripted_server --scenario FILE [--host H] [--port 0] \\
        [--port-file F] [--log F] [--expect-auth TOKEN]

It prints the OpenAI base URL (``http://H:PORT/v1``) as the first stdout line, writes the port
to ``--port-file`` (atomically, after binding) so callers can wait for it, serves until SIGTERM
or SIGINT, then exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from skillopt.testing.scripted import (
    ErrorReply,
    Match,
    OfferedTool,
    RecordedRequest,
    Responder,
    Rule,
    Scenario,
    ScenarioError,
    ScenarioLike,
    ScriptedMessage,
    ScriptedModelServer,
    ScriptedReply,
    ScriptedRequest,
    ShellCommand,
    ToolCall,
    UsageOverride,
    redact_headers,
)

__all__ = [
    "ErrorReply",
    "Match",
    "OfferedTool",
    "RecordedRequest",
    "Responder",
    "Rule",
    "Scenario",
    "ScenarioError",
    "ScenarioLike",
    "ScriptedMessage",
    "ScriptedModelServer",
    "ScriptedReply",
    "ScriptedRequest",
    "ShellCommand",
    "ToolCall",
    "UsageOverride",
    "main",
    "redact_headers",
]


def _write_port_file(path: Path, port: int) -> None:
    # Write then rename, so a watcher never reads a half-written file.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{port}\n", encoding="utf-8")
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until SIGTERM/SIGINT. Returns the exit code (0, or 2 on a bad scenario)."""
    parser = argparse.ArgumentParser(
        prog="python -m skillopt.testing.scripted_server",
        description="Serve a scripted model scenario (OpenAI Chat/Responses, Anthropic Messages) over HTTP.",
    )
    parser.add_argument("--scenario", required=True, help="scenario file (.yaml/.yml/.json)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the bound port here after binding")
    parser.add_argument("--log", type=Path, help="append recorded requests as JSON lines")
    parser.add_argument("--expect-auth", help="require this API key (Bearer or x-api-key)")
    parser.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )

    try:
        scenario = Scenario.load(args.scenario)
    except ScenarioError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    server = ScriptedModelServer(
        scenario, host=args.host, port=args.port, log_path=args.log, expect_auth=args.expect_auth
    )
    server.start()
    try:
        if args.port_file is not None:
            _write_port_file(args.port_file, server.port)
        print(server.base_url, flush=True)
        print(f"anthropic base url: {server.anthropic_base_url}", file=sys.stderr, flush=True)
        # With a timeout: a signal delivered to a server thread only runs its (main-thread)
        # handler once the main thread executes bytecode again (see `skillopt serve`).
        while not stop.wait(0.25):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
