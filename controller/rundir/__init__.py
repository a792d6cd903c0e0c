"""The run directory as the one source of truth about a run.

* :mod:`controller.rundir.lock`: the lock a running ``train``/``eval`` holds, stop requests;
* :mod:`controller.rundir.live`: trainer callbacks writing ``live.json`` and honouring stops;
* :mod:`controller.rundir.reader`: reading a run (status, steps, rollouts, skills, logs), for
  the WebUI, ``skillopt runs`` and anything else.
"""
