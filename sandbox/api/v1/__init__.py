"""Generated gRPC code for ``skillopt.sandbox.v1``. Do not edit: run ``python -m sandbox.api.codegen``."""
