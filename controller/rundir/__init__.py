"""The run directory as the one source of truth about a run.

* :mod:`controller.rundir.lock`: the lock a running ``train``/``eval`` holds, stop requests;
* :mod:`controller.rundir.live`: trainer callbacks writing ``live.json`` and honouring stops;
* :mod:`controller.rundir.reader`: reading a run (steps, rollouts, skills, logs) through the run
  directory's records (:mod:`skillopt.trainer.rundir`), for the WebUI, ``skillopt runs`` and
  anything else; :mod:`controller.rundir.status` its status, :mod:`controller.rundir.damage`
  what is damaged in it.
"""
