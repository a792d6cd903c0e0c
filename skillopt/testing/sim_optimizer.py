"""The simulated optimizer model (``sim-optimizer``, and ``sim-optimizer-noisy`` for
``run.simulate: noisy``): it answers every optimizer stage in its prompt's JSON schema, proposing
the catalogue rules of the failed tasks it is shown (:mod:`skillopt.testing.simulation` says
more). It reads the stage from the ``X-Skillopt-Stage`` header.
"""

from __future__ import annotations

import collections
import json
import re

from skillopt.jsonx import extract_json_object
from skillopt.testing.noise import DECOYS, HARMFUL
from skillopt.testing.noise import _unit as unit
from skillopt.testing.package_sim import package_edits
from skillopt.testing.scripted import ScriptedRequest
from skillopt.testing.sim_catalogue import CATALOGUE, PACKAGE_TASKS, normalized, package_stated

__all__ = ["SIM_NOISY_OPTIMIZER", "SIM_OPTIMIZER", "SimulatedOptimizer"]

SIM_OPTIMIZER = "sim-optimizer"
SIM_NOISY_OPTIMIZER = "sim-optimizer-noisy"
#: How often the noisy optimizer's analysts slip a harmful statement into their patch.
_HARM_RATE = 0.25
_TRAJECTORY = re.compile(r"^#+ Trajectory \d+ \(id=([^)\s]+)\)", re.M)
_POOL_LINE = re.compile(r"^\[(\d+)\] .*support=(\d+)", re.M)
_GENERIC_ADVICE = (
    "Re-read the instruction once more before you write the final script.",
    "Keep the script short and readable; name variables after the columns they hold.",
    "Close every workbook you open and save exactly once at the end.",
)


def _section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}[^\n]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return match.group(1) if match else ""


class SimulatedOptimizer:
    """Responder playing the optimizer model (see :mod:`skillopt.testing.simulation`);
    ``noisy``: the noisy simulation's, whose analysts also propose decoy and harmful edits."""

    def __init__(self, *, noisy: bool = False) -> None:
        self.noisy = noisy
        self.model = SIM_NOISY_OPTIMIZER if noisy else SIM_OPTIMIZER

    def __call__(self, req: ScriptedRequest):
        if req.model != self.model:
            return None
        stage = req.headers.get("x-skillopt-stage", "")
        user = req.last_user_text
        handler = getattr(self, f"_{stage}", None)
        body = handler(user, req) if handler else {"reasoning": f"no simulated answer for stage {stage!r}"}
        return {"text": "```json\n" + json.dumps(body, ensure_ascii=False) + "\n```"}

    # -- analysts ----------------------------------------------------------------------------

    def _analyst(self, user: str, req: ScriptedRequest) -> dict:
        skill = _section(user, "Current Skill")
        ids = _TRAJECTORY.findall(user)
        budget = int(m.group(1)) if (m := re.search(r"L=(\d+)", user)) else 4
        if "## Failed Trajectories" in user or "## Original" in user:
            counts = collections.Counter(
                r for r in (CATALOGUE.rule_of(i) for i in ids) if r and not CATALOGUE.stated(r, skill)
            )
            edits = [
                {"op": "append", "content": f"- {CATALOGUE.text(rule)}"}
                for rule, _ in counts.most_common(budget)
            ]
            package = collections.Counter(r for r in map(PACKAGE_TASKS.rule_of, ids) if r is not None)
            summary = []
            for prule, n in package.most_common():
                fix = package_edits(prule, prompt=user, stated=package_stated)
                if fix:
                    edits += fix
                    summary.append(
                        {
                            "failure_type": "rule_missing",
                            "count": n,
                            "description": f"tasks need the {prule.kind} {prule.path}: {prule.text}",
                        }
                    )
            if self.noisy:
                covered = [i for i in ids if (r := CATALOGUE.rule_of(i)) and CATALOGUE.stated(r, skill)]
                edits += self._noise_edits(ids, skill, decoy=bool(covered))
            return {
                "batch_size": len(ids),
                "failure_summary": [
                    {
                        "failure_type": "rule_missing",
                        "count": n,
                        "description": f"tasks need the rule '{rule.rsplit(':', 1)[-1]}'",
                    }
                    for rule, n in counts.most_common()
                ]
                + summary,
                "patch": {
                    "reasoning": f"{len(ids)} failures; {len(counts) + len(summary)} missing rules",
                    "edits": edits,
                },
            }
        # Deterministic (a resumed run must get the same answer): chosen by the ids shown.
        if self.noisy:
            success_edits = self._noise_edits(ids, skill, decoy=True)
        else:
            advice = _GENERIC_ADVICE[sum(map(ord, "".join(ids))) % len(_GENERIC_ADVICE)]
            success_edits = [{"op": "append", "content": f"- {advice}"}] if advice not in skill else []
        return {
            "batch_size": len(ids),
            "success_patterns": ["the agent followed the stated rules"],
            "patch": {"reasoning": "successful runs share careful reading", "edits": success_edits},
        }

    @staticmethod
    def _noise_edits(ids: list[str], skill: str, *, decoy: bool) -> list[dict]:
        """The noisy analyst's extra edits, fixed by the trajectories shown: a decoy (it
        explains a failure the skill covers already, or a success, by advice that changes
        nothing) and, one time in four, a harmful statement."""
        out = []
        norm = normalized(skill)
        if decoy:
            fresh = [d for d in DECOYS if normalized(d) not in norm]
            if fresh:
                out.append({"op": "append", "content": f"- {fresh[int(unit('decoy', *ids) * len(fresh))]}"})
        if unit("harm", *ids) < _HARM_RATE:
            fresh = [h for h in HARMFUL if normalized(h) not in norm]
            if fresh:
                out.append({"op": "append", "content": f"- {fresh[int(unit('which', *ids) * len(fresh))]}"})
        return out

    # -- aggregate / select --------------------------------------------------------------------

    def _merge(self, user: str, req: ScriptedRequest) -> dict:
        seen: dict[str, dict] = {}
        for block in re.findall(r"```json\n(.*?)\n```", user, re.S):
            try:
                pools = json.loads(block)
            except json.JSONDecodeError:
                continue
            for pool in pools if isinstance(pools, list) else [pools]:
                for edit in pool.get("edits", []) if isinstance(pool, dict) else []:
                    key = _edit_key(edit)
                    if key in seen:
                        seen[key]["support_count"] = seen[key].get("support_count", 1) + edit.get(
                            "support_count", 1
                        )
                    else:
                        seen[key] = dict(edit)
        return {"reasoning": f"deduplicated to {len(seen)} edits", "edits": list(seen.values())}

    def _ranking(self, user: str, req: ScriptedRequest) -> dict:
        pool = [(int(i), int(s)) for i, s in _POOL_LINE.findall(user)]
        order = [i for i, _ in sorted(pool, key=lambda p: (-p[1], p[0]))]
        return {"reasoning": "highest support first", "selected_indices": order}

    def _lr_autonomous(self, user: str, req: ScriptedRequest) -> dict:
        return {"learning_rate": 2, "reasoning": "moderate step", "confidence": "medium", "risk_notes": ""}

    def _rewrite(self, user: str, req: ScriptedRequest) -> dict:
        skill = _section(user, "Current Skill").strip()
        return {"reasoning": "kept the skill", "change_summary": [], "new_skill": skill + "\n"}

    # -- epoch stages ----------------------------------------------------------------------------

    def _slow_update(self, user: str, req: ScriptedRequest) -> dict:
        regressions = user.count("regressed")
        return {
            "reasoning": f"{regressions} mentions of regressions in the comparison",
            "slow_update_content": "Apply every rule of this skill on every task before you write the final script.",
        }

    def _meta_skill(self, user: str, req: ScriptedRequest) -> dict:
        return {
            "reasoning": "concrete rules moved the score; generic advice did not",
            "meta_skill_content": "- Prefer concrete do/don't rules tied to a failure pattern over generic advice.",
        }

    def _probe(self, user: str, req: ScriptedRequest) -> dict:
        # The diagnostic-design prompt asks for a "diagnostic_instruction" field; the probe
        # analyst's prompt only talks about the instruction (and wants a patch).
        if '"diagnostic_instruction"' in req.system:
            return {
                "reasoning": "ask the target to state its assumptions",
                "diagnostic_instruction": "Before the code, add a comment that lists the sheets and header cells you rely on.",
            }
        return self._analyst(user.replace("## Original", "## Failed Trajectories"), req)

    def _appendix_consolidate(self, user: str, req: ScriptedRequest) -> dict:
        obj = extract_json_object(user) or {}
        return {"reasoning": "unchanged", "notes": obj.get("notes", [])}


def _edit_key(edit: dict) -> str:
    """What makes two proposed edits the same for the merge: the content, and for an edit of
    another file than SKILL.md (or a whole-file one) the file and the operation too."""
    key = normalized(str(edit.get("content", "")))
    file, op = edit.get("file") or "SKILL.md", edit.get("op")
    return key if file == "SKILL.md" and op not in ("create_file", "delete_file") else f"{file}|{op}|{key}"
