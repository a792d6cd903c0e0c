"""TextWorld: interactive text games generated from seeds, played one action per step in the
rollout's container (see ``README.md`` of ``skillopt/envs``)."""
