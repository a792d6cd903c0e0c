"""The sandbox service: gRPC API, hardened container runtime, rollout service."""

__all__: list[str] = []
