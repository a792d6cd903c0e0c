"""The in-container runner (``runner.py``) and the protocol the sandbox service speaks with it
(``protocol.py``). Stdlib only: this package is mounted into every rollout container, where it
runs on the image's Python as ``_skillopt_runner``; nothing here may import the project."""
