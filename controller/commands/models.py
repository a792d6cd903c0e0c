"""``skillopt models check``: which provider each model role of a config resolves to, whether
its key is on this machine (and its profile on each sandbox host), and with ``--call`` one tiny
real call to each."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from controller.fleet.access import add_fleet_arguments
from skillopt.errors import SkillOptError

if TYPE_CHECKING:
    from controller.models_check import HostCheck, RoleCheck
    from skillopt.config import Config

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="check the model roles of a config: provider, key, and (--call) one tiny call each",
        description="Your own model: see which provider each role of a config resolves to (docs/models.md).",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    c = actions.add_parser(
        "check",
        help="resolve each role's provider profile; --call makes one tiny real call to each",
        description=(
            "For each model role of the config (optimizer: called from this machine; target: called by "
            "the sandbox hosts, the embedded one on this machine) show the provider profile it resolves "
            "to (kind, API, base URL, model) and whether its key is present on this machine; keys are "
            "never printed, only where they come from. --call sends each role one short real request "
            "(a few tokens, through the same SDK path as a run) and reports ok, latency or the error. "
            "With sandbox endpoints (--endpoints or sandbox.endpoints), each host is asked which "
            "profiles it serves (a host loads a profile only with its key). Exits 1 when a role or a "
            "host cannot work, 2 on bad arguments. Examples:\n"
            "  skillopt models check --config spreadsheetbench\n"
            "  skillopt models check --config my.yaml --set model.providers_file=providers.yaml --call\n"
            "  skillopt models check --config my.yaml --endpoints h1:50051,h2:50051"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("--config", required=True, help="YAML config file or a built-in name")
    c.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a config key (repeatable)"
    )
    c.add_argument("--call", action="store_true", help="make one tiny real call to each role's model")
    c.add_argument("--timeout", type=float, default=60.0, help="seconds per call (default 60)")
    add_fleet_arguments(
        c.add_argument_group("sandbox fleet", "the hosts asked which provider profiles they serve"),
        config_keys=True,
        endpoints_default="no host is asked",
    )
    c.add_argument("--json", action="store_true", help="print one JSON object")
    c.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from controller.fleet.access import config_with_access
    from controller.models_check import check_hosts, check_roles, problems_of
    from skillopt.config import load_config

    overrides = list(args.set)
    try:
        cfg = config_with_access(load_config(args.config, overrides), args)
        roles = check_roles(cfg, call=args.call, timeout_s=args.timeout)
        hosts = check_hosts(cfg)
    except SkillOptError as exc:
        print(f"skillopt models check: {exc.message}", file=sys.stderr)
        return 2
    problems = problems_of(roles, hosts)
    if args.json:
        print(
            json.dumps(
                {
                    "ok": not problems,
                    "simulate": cfg.run.simulate,
                    "providers_file": cfg.model.providers_file,
                    "roles": [r.to_json() for r in roles],
                    "hosts": [h.to_json() for h in hosts],
                    "problems": problems,
                },
                indent=2,
            )
        )
    else:
        _print(cfg, roles, hosts, problems)
    return 1 if problems else 0


def _print(
    cfg: Config, roles: Sequence[RoleCheck], hosts: Sequence[HostCheck], problems: Sequence[str]
) -> None:
    source = (
        cfg.model.providers_file or "none (profiles from OPENAI_API_KEY, ANTHROPIC_API_KEY, AZURE_OPENAI_*)"
    )
    print(f"providers file: {source}")
    for r in roles:
        p = r.profile
        if p:
            api = f", api {p['api']}" if p.get("api") else ""
            where = f"{p['kind']}{api}, {p['base_url']}"
            key = f"key {r.key}" + (
                f" (from {p['credential']})" if p.get("credential") not in ("none", None) else ""
            )
        else:
            where, key = "no such profile", "key missing"
        print(f"{r.role:<9} {r.model} via {r.provider}: {where}; {key}; called from {r.called_from}")
        if r.call is not None:
            c = r.call
            outcome = (
                f"ok in {c.seconds:.2f} s, replied {c.reply!r}"
                if c.ok
                else f"FAILED after {c.seconds:.2f} s: {c.error}"
            )
            print(f"          call: {outcome}")
    for h in hosts:
        state = "ok" if h.ok else "PROBLEM"
        print(
            f"host {h.address} ({h.host or '-'}, {h.health}): serves {', '.join(h.providers) or 'no profile'}; {state}"
        )
    for problem in problems:
        print(f"problem: {problem}")
    if cfg.run.simulate in ("on", "noisy"):
        print(
            f"note: run.simulate={cfg.run.simulate}: a run with this config uses scripted models, not these"
        )
    elif cfg.run.simulate == "auto" and problems:
        print("note: run.simulate=auto: a run with this config would fall back to the offline simulation")
    print("models: ok" if not problems else f"models: {len(problems)} problem(s)")
