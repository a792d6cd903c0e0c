"""What the controller and the sandbox hosts tell an operator from outside: traces
(:mod:`skillopt.observability.tracing`)."""
