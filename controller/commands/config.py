"""``skillopt config``: the effective run config and where each value came from, and the
config's JSON Schema (for editors that validate YAML)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from skillopt.errors import SkillOptError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "config",
        help="show the effective config (with where each value came from) or its JSON Schema",
        description=(
            "Inspect run configs. Examples:\n"
            "  skillopt config show --config searchqa_demo --set train.batch_size=10\n"
            "  skillopt config show --config my.yaml --json\n"
            "  skillopt config schema > skillopt.schema.json   # for YAML editors\n"
            "  skillopt config list"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    show = actions.add_parser("show", help="the effective config: every key, its value and its origin")
    show.add_argument("--config", required=True, help="YAML config file or a built-in name")
    show.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key (repeatable)"
    )
    show.add_argument("--json", action="store_true", help="one JSON object: {config, origins}")
    show.set_defaults(func=_show)
    schema = actions.add_parser("schema", help="the JSON Schema of a config file")
    schema.set_defaults(func=_schema)
    listing = actions.add_parser("list", help="the shipped configs (each env's, and the shared fragments')")
    listing.set_defaults(func=_list)


def _show(args: argparse.Namespace) -> int:
    from skillopt.config import explain_config

    try:
        config, origins = explain_config(args.config, list(args.set))
    except SkillOptError as exc:
        print(f"skillopt config: {exc.message}", file=sys.stderr)
        return 2
    data = config.to_dict(redacted=True)
    if args.json:
        keys = {f"{s}.{k}" for s, fields in data.items() for k in fields}
        print(
            json.dumps({"config": data, "origins": {k: _origin(k, origins) for k in sorted(keys)}}, indent=2)
        )
        return 0
    print(f"# skillopt config show --config {args.config}" + "".join(f" --set {s}" for s in args.set))
    print("# every key: value  # where it came from (default, file, _base_, --set)")
    for section, fields in data.items():
        print(f"{section}:")
        for key, value in fields.items():
            line = f"  {key}: {json.dumps(value, ensure_ascii=False)}"
            print(f"{line:<60}  # {_origin(f'{section}.{key}', origins)}")
    return 0


def _origin(key: str, origins: dict[str, str]) -> str:
    """The layer that set ``key`` or, for a mapping, each of its entries (``env.options``)."""
    if key in origins:
        return origins[key]
    inner = sorted({v for k, v in origins.items() if k.startswith(f"{key}.")})
    return ", ".join(inner) if inner else "default"


def _schema(args: argparse.Namespace) -> int:
    from skillopt.config import Config

    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://skillopt.dev/schema/config.json",
        **Config.model_json_schema(),
    }
    schema["title"] = "skillopt run config"
    schema["description"] = (
        "A skillopt run config (YAML). Sections of keys; `_base_` names a file (or a shipped config) "
        "this one inherits from. Strings of numbers are read as numbers, lists may be comma-separated."
    )
    schema["properties"] = {
        "_base_": {
            "type": "string",
            "description": "The config this one inherits from (a path or a shipped name).",
        },
        **schema["properties"],
    }
    print(json.dumps(_partial(schema), indent=2))
    return 0


def _partial(node: Any) -> Any:
    """A file is one layer: any key may come from its ``_base_`` (``env.name`` too), so the
    schema of a file requires nothing."""
    if isinstance(node, dict):
        return {k: _partial(v) for k, v in node.items() if k != "required"}
    if isinstance(node, list):
        return [_partial(v) for v in node]
    return node


def _list(args: argparse.Namespace) -> int:
    from skillopt.config import builtin_config, list_builtin_configs

    for name in list_builtin_configs():
        print(f"{name:<34} {builtin_config(name)}")
    return 0
