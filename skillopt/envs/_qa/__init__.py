"""Shared machinery of the question-answering envs (not an env itself).

* :mod:`.text`: answer extraction and SQuAD-style metrics (EM, token F1, sub-EM).
* :mod:`.data`: split files under a data root, layouts and carves (:class:`.data.QAData`).
* :mod:`.env`: the service side (:class:`.env.QAEnv`): payload models, prompts, the ``qa``
  agent and the agent-CLI variants.
* :mod:`.scoring`: ``skillopt score`` for one raw item and one response.
"""

from __future__ import annotations

__all__: list[str] = []
