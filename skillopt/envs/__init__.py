"""Benchmark environments, one folder each (``skillopt/envs/README.md``).

``SKILLOPT_ENV_PATH`` (directories separated by ``os.pathsep``) adds env folders kept outside
this package: each directory's sub-folders import as ``skillopt.envs.<name>`` and are found by
:mod:`skillopt.envs.registry` like the shipped ones. Every process of a run must see the same
value (the sandbox hosts grade with the env's own code).
"""

import os

__path__ = [*__path__, *(d for d in os.environ.get("SKILLOPT_ENV_PATH", "").split(os.pathsep) if d)]
