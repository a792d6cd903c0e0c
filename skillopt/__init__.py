"""skillopt: train an agent's skill document with a training-loop discipline."""

__version__ = "0.1.0"

__all__ = ["__version__"]
