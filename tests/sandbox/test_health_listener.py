"""``--health-listen``: a plaintext listener serving only grpc.health.v1 (for Kubernetes'
gRPC probes), with the main port's status: SERVING while up, NOT_SERVING once draining."""

from __future__ import annotations

import threading

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.sandbox.conftest import start_service


def test_health_only_listener_follows_the_drain(docker_client, scripted):
    gen = start_service(scripted, pool_size=0, server_kw={"health_listen": "127.0.0.1:0"})
    svc = next(gen)
    port = svc.running.health_port
    assert port and port != svc.running.port
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = health_pb2_grpc.HealthStub(channel)
    try:
        assert (
            stub.Check(health_pb2.HealthCheckRequest(), timeout=10).status
            == health_pb2.HealthCheckResponse.SERVING
        )
        # Nothing else is served there: not the sandbox API.
        try:
            channel.unary_unary("/skillopt.sandbox.v1.Sandbox/Describe")(b"", timeout=10)
            raise AssertionError("the health port served the sandbox API")
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.UNIMPLEMENTED
        watch = stub.Watch(health_pb2.HealthCheckRequest(), timeout=120)
        assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
        drain = threading.Thread(target=lambda: next(gen, None))  # leaving serve(): the drain
        drain.start()
        statuses = []
        try:
            for reply in watch:
                statuses.append(reply.status)
                if reply.status != health_pb2.HealthCheckResponse.SERVING:
                    break
        except grpc.RpcError:
            pass
        drain.join(120)
        assert statuses and statuses[-1] == health_pb2.HealthCheckResponse.NOT_SERVING, statuses
    finally:
        channel.close()
        next(gen, None)
