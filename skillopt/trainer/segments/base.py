"""The one shape of every segment of a run: :class:`Segment`.

A segment is a piece of the run the loop drives (:mod:`skillopt.trainer.loop`): it computes
from the committed state and its frozen input (``run``), then applies what it computed
(``commit``). A segment runs one or more *stages*: the named, timed pieces of the method that
callbacks see (``on_stage_start``/``on_stage_end``), the WebUI shows, and before each of which
a stop asked for is honoured inside a step (:data:`skillopt.trainer.context.STEP_STAGES`).
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from skillopt.trainer.context import RunContext

__all__ = ["Segment"]

S = TypeVar("S")


class Segment(Protocol[S]):
    """A segment over a frozen state of type ``S`` (a step's, an epoch end's, the fit's).

    ``run`` changes nothing but the run directory's caches (every answer and row it builds on
    is kept there, so running it again after a crash or a stop asks nothing twice) and returns
    the state with its outputs; ``commit`` applies them to the run state. The loop calls
    ``commit`` only for a segment that has not committed before: a step's committed segments
    run again on resume and replay from their caches.
    """

    @property
    def name(self) -> str:
        """The segment's name: in logs, and in the run state's list of a step's committed
        segments (``step_stages``) or an epoch's (``epoch_stages``: ``<name>_<epoch>``)."""
        ...

    @property
    def stage(self) -> str | None:
        """The one stage this segment is, which the loop announces around its ``run`` and
        ``commit`` (so the stage's end sees it committed); ``None``: the segment runs several
        stages and announces each itself (:meth:`RunContext.stage`)."""
        ...

    def run(self, ctx: RunContext, state: S) -> S:
        """Compute the segment's outputs; returns ``state`` with them."""
        ...

    def commit(self, ctx: RunContext, state: S) -> None:
        """Apply the outputs ``run`` returned to the run state, and commit them."""
        ...
