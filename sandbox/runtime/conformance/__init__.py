"""The conformance suite of :class:`sandbox.runtime.base.SandboxRuntime`: provider-agnostic
checks that every runtime implementation must pass (Inspect AI's ``self_check`` idea).

Each check takes a :class:`Conformance` (the runtime, the spec to create sandboxes with, and
one shared sandbox that checks lease anew with their own settings, so the suite creates a few
sandboxes rather than one per check) and raises ``AssertionError`` (with what was seen) when
the runtime breaks the contract. Run them all from a test, per provider, with an explicit list
of known failures (empty for Docker)::

    @pytest.mark.parametrize("name", sorted(CHECKS))
    def test_docker_conforms(conformance, name):
        CHECKS[name](conformance)

Nothing here knows Docker: a remote VM or Kubernetes pod runtime is checked the same way.
"""

from sandbox.runtime.conformance import recycling, rollouts, sessions  # noqa: F401 - their checks register
from sandbox.runtime.conformance.core import CHECKS, Check, Conformance

__all__ = ["CHECKS", "Check", "Conformance"]
