"""Keepalive on a long, quiet stream: the client pings while a rollout waits on a slow model,
and the service accepts the pings (a misnamed server option once made it count them as abuse
and end the connection with GOAWAY "too_many_pings" after three)."""

from __future__ import annotations

import dataclasses

from controller.client.sandbox_client import ChannelConfig, SandboxClient
from skillopt.testing.fixtures.spreadsheetbench import solution_code
from tests.sandbox.conftest import fenced, request_for, start_service

TASK = "32255"


def test_a_quiet_stream_survives_many_keepalive_pings(docker_client, scripted, scripts, sample):
    marker = "MARKER-SLOW-MODEL-KEEPALIVE"
    # Eight seconds of silence on the stream: the client sends five or six pings meanwhile; with
    # the server's limit ignored (its default is one per 5 min), the third would end the call.
    scripts.scripts[marker] = [{"text": fenced(solution_code(TASK)), "delay_s": 8.0}]
    try:
        for svc in start_service(
            scripted, capacity=1, pool_size=1, server_kw={"min_client_ping_interval_s": 1.0}
        ):
            channel = ChannelConfig(address=svc.running.address, token=svc.token, keepalive_s=1.5)
            with SandboxClient(channel) as client:
                req = dataclasses.replace(
                    request_for(sample, TASK),
                    skill=dataclasses.replace(request_for(sample, TASK).skill, content=marker),
                )
                row = client.run(req, timeout_s=120)
            assert row.infra_error is None and row.hard == 1.0, row.fail_reason
    finally:
        del scripts.scripts[marker]
