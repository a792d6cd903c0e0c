"""The labels every container and network a sandbox runtime creates carries (what reapers,
fleet tools and tests select by), in one module that the runtime and the gateway both import."""

from __future__ import annotations

__all__ = ["LABEL_EXPIRES", "LABEL_HOST", "LABEL_INSTANCE", "LABEL_MANAGED", "LABEL_OWNER", "LABEL_SPEC"]

#: Created by skillopt (``"1"``): the reapers' first filter.
LABEL_MANAGED = "skillopt.managed"
#: The sandbox host id (``skillopt serve --host-id``; ``grade-…`` for local grading).
LABEL_HOST = "skillopt.host"
#: One runtime instance of that host (a restart is another instance).
LABEL_INSTANCE = "skillopt.instance"
#: The owning process (:mod:`sandbox.runtime.owner`): swept once it is provably gone.
LABEL_OWNER = "skillopt.owner"
#: The container spec's key (the warm pool it belongs to).
LABEL_SPEC = "skillopt.spec"
#: Unix time after which any reaper removes the container, whatever its owner.
LABEL_EXPIRES = "skillopt.expires"
