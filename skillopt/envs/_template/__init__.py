"""A template env: copy this folder to ``skillopt/envs/<name>/``, rename, fill in (see
``skillopt/envs/README.md``). It is a small but complete question-answering env (items
``{id, question, answer}``, exact match after SQuAD normalisation) and is kept working by
``tests/skillopt/envs/test_env_template.py``; it is not registered."""

from __future__ import annotations

__all__: list[str] = []
