"""What the code-generation envs (HumanEval, MBPP) share.

Modules: :mod:`.items` (payloads, raw items, categories, MBPP's split), :mod:`.plan` (assert
suites → probes or trace mode, on the trusted side), :mod:`.harness` (the script that runs in a
fresh grading container), :mod:`.values` (strict decoding of the container's claims),
:mod:`.grading` (the trusted verdict), :mod:`.env` (agents and rows), :mod:`.data` (splits),
:mod:`.scoring` (``skillopt score``). See ``skillopt/envs/README.md``, "Code envs".
"""

from __future__ import annotations

__all__: list[str] = []
