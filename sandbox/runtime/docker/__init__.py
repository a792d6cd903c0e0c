"""The Docker implementation of the runtime contract (:mod:`sandbox.runtime.base`): hardened
rollout containers on a local Docker engine, optionally under gVisor.

Start at ``runtime.py`` (:class:`~sandbox.runtime.docker.runtime.DockerRuntime`, the façade);
each piece it holds has its own module: the engine, the image cache, creating a container, the
leased container (``sandbox.py``), the runner connection, the exec-agent network, the state
directory and the reaper. This is the only package that talks to Docker: everything else uses
the contract, and the architecture test (``tests/test_architecture.py``) keeps it that way.
Import the modules themselves; this file imports nothing, so importing one module does not
load the others.
"""
