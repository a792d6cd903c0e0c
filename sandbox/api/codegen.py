"""Regenerate the gRPC Python code from ``proto/`` (one command).

Usage::

    python -m sandbox.api.codegen          # rewrite sandbox/api/v1/*_pb2*.py(i)
    python -m sandbox.api.codegen --check  # exit 1 if the committed code is stale

The ``.proto`` path mirrors the generated package (``proto/sandbox/api/v1`` →
``sandbox.api.v1``) because protoc's generated imports follow the file path.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "proto"
PROTO_FILES = ("sandbox/api/v1/sandbox.proto",)
OUT_PACKAGE = ROOT / "sandbox" / "api" / "v1"
GENERATED = ("sandbox_pb2.py", "sandbox_pb2.pyi", "sandbox_pb2_grpc.py")


def generate(out_root: Path) -> list[Path]:
    """Run protoc into ``out_root`` (a tree root); return the generated files."""
    import grpc_tools
    from grpc_tools import protoc  # dev dependency, imported only here

    include = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{include}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *(str(PROTO_DIR / p) for p in PROTO_FILES),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed; see the message above")
    return [out_root / "sandbox" / "api" / "v1" / name for name in GENERATED]


def stale_files() -> list[str]:
    """Names of generated files whose committed content differs from a fresh generation."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        return [
            f.name
            for f in fresh
            if not (OUT_PACKAGE / f.name).exists() or (OUT_PACKAGE / f.name).read_bytes() != f.read_bytes()
        ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only check that the code is current")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        if stale:
            print(f"stale generated code: {', '.join(stale)}; run: python -m sandbox.api.codegen")
            return 1
        print("generated code is current")
        return 0
    OUT_PACKAGE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for f in generate(Path(tmp)):
            (OUT_PACKAGE / f.name).write_bytes(f.read_bytes())
            print(f"wrote {(OUT_PACKAGE / f.name).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
