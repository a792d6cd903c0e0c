"""Orchestration: CLI, rollout client over gRPC, fleet placement, run directory."""

__all__: list[str] = []
