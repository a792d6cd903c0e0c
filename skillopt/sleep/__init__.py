"""Sleep: learn from the user's own agent sessions (docs/sleep.md).

Built so far, the harvest (``skillopt sleep harvest``): read Claude Code's and Codex's session
transcripts on this machine (read-only), normalise each into one :class:`HarvestedSession`,
take secrets out, and write the records with an index. Nothing leaves the machine. Then the
mine (``skillopt sleep mine``, :mod:`skillopt.sleep.mine`): one task per session with a
checkable reference, split by session into the ``sleep`` env's data.

============================  =================================================================
module                        holds
============================  =================================================================
``sleep.sources``             where each CLI keeps its transcripts; reading JSON lines
``sleep.claude_code``         Claude Code's transcript format -> a record
``sleep.codex``               Codex's rollout format -> a record
``sleep.signals``             the rules both readers share: outcome signals, skills, size caps
``sleep.redact``              the one redactor of harvested text
``sleep.record``              the record and index models, and the text a model will read
``sleep.store``               the harvest folder (records, ``index.json``), written atomically
``sleep.harvest``             the harvest itself: find, skip unchanged, read, redact, write
``sleep.rules``               the rule miner: a session -> a task with a checkable reference
``sleep.model_miner``         the model miner: the same, written by a model and validated
``sleep.mine``                ``skillopt sleep mine``: mine, split by session, write the env's data
============================  =================================================================
"""

from skillopt.sleep.harvest import HarvestConfig, HarvestResult, SkippedFile, harvest, parse_since
from skillopt.sleep.record import (
    SOURCES,
    HarvestedSession,
    HarvestIndex,
    IndexEntry,
    Outcome,
    Source,
    ToolUse,
    Turn,
    render_session,
)
from skillopt.sleep.redact import Redactor
from skillopt.sleep.signals import HarvestLimits
from skillopt.sleep.sources import source_root

__all__ = [
    "SOURCES",
    "HarvestConfig",
    "HarvestIndex",
    "HarvestLimits",
    "HarvestResult",
    "HarvestedSession",
    "IndexEntry",
    "Outcome",
    "Redactor",
    "SkippedFile",
    "Source",
    "ToolUse",
    "Turn",
    "harvest",
    "parse_since",
    "render_session",
    "source_root",
]
