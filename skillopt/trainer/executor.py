"""The trainer's seam to wherever rollouts run (a gRPC fleet, the embedded local service).

Implementations (``controller.fleet``) own placement, deadlines, retries and cancellation;
the trainer only hands over requests and receives rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from skillopt.types import RolloutRequest, RolloutResult

__all__ = ["RolloutExecutor"]


class RolloutExecutor(Protocol):
    """Runs rollouts somewhere and returns one row per request.

    Invariants: exactly one row per request, in any order, each delivered once through
    ``on_result`` as soon as it is known; a request that could not run yields a row with
    ``infra_error`` set (never an exception for one bad rollout); rows keep the request's
    ``rollout_id``. Setting ``stop`` cancels what is in flight and returns early.
    """

    def run(
        self,
        requests: Sequence[RolloutRequest],
        *,
        on_result: Callable[[RolloutResult], None],
        stop: threading.Event,
    ) -> None:
        """Run ``requests``; blocks until every row was delivered or ``stop`` is set."""
        ...

    def hosts(self) -> list[str]:
        """Sandbox hosts this executor uses (for the run summary)."""
        ...
