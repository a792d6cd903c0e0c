"""The game driver, run in the rollout container once per step (never imported on the host).

Reads ``episode.json`` (``{"game": "game/game.z8", "actions": [...]}``), starts the game,
replays every action (TextWorld games are deterministic, so the episode's state is its action
list: the runner forks a fresh process per execution and keeps nothing between them) and
prints one line ``@@TW@@`` + JSON: the last observation, score, max score, won, lost, done,
moves, the admissible commands and how many actions were played before the game ended.

The actions are data read from a file, never shell words; the verdict fields come from the
game's own state (the TextWorld state tracker), never from the text of an observation.
"""

import json
import re
import sys
import time

_STATUS = re.compile(r"^\s*>?\s*-= .*? =-\s*\d+/\d+\s*$", re.M)
# The ASCII-art banner of the first observation: lines drawn only with these characters.
_ART = re.compile(r"^[\s_|\\/$<>()=-]*[_|$\\/][\s_|\\/$<>()=-]*$", re.M)


def _clean(text):
    text = _STATUS.sub("", text or "")
    text = _ART.sub("", text)
    text = re.sub(r"(?m)^\s*>\s*$", "", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _link_frotz():
    """Jericho loads a *copy* of its Z-machine library from a temporary folder (so one process
    can run several games); the container's /tmp and workspace are mounted noexec, where the
    loader cannot map it. One game per process here: a link to the installed library (on the
    read-only root, which is executable) does the same."""
    import os

    import jericho.jericho as jj

    class _Link:
        @staticmethod
        def copyfile(src, dst):
            os.symlink(src, dst)

    jj.shutil = _Link


def main():
    t0 = time.monotonic()
    with open("episode.json", encoding="utf-8") as fh:
        episode = json.load(fh)
    import textworld

    _link_frotz()
    infos = textworld.EnvInfos(
        admissible_commands=True, score=True, max_score=True, won=True, lost=True, moves=True
    )
    env = textworld.start(episode["game"], request_infos=infos)
    t_start = time.monotonic()
    state = env.reset()
    played = 0
    done = False
    for action in episode["actions"]:
        if done:
            break
        state, _reward, done = env.step(action)
        played += 1
    out = {
        "observation": _clean(state.feedback),
        "score": int(state["score"] or 0),
        "max_score": int(state["max_score"] or 0),
        "won": bool(state["won"]),
        "lost": bool(state["lost"]),
        "done": bool(done),
        "moves": int(state["moves"] or 0),
        "played": played,
        "admissible": sorted(state["admissible_commands"] or []),
        "timings_s": {"load": t_start - t0, "play": time.monotonic() - t_start},
    }
    env.close()
    sys.stdout.write("@@TW@@" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
