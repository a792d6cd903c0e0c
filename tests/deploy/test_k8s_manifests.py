"""The Kubernetes manifests (``docker/k8s``), validated without a cluster: every document is
loaded into the official ``kubernetes`` client's typed model and must round-trip unchanged
(a misspelt or misplaced field is dropped by the model and shows up as a difference), and the
wiring is checked: probes on grpc.health.v1, requests and limits, security contexts, Secrets,
the same-path rule for the engine, the headless Service the controller resolves, and the
service's arguments parse with ``skillopt serve``'s own parser."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from controller.cli import build_parser
from sandbox.server.host_config import HostConfig, load_host_config

K8S = Path(__file__).resolve().parents[2] / "docker" / "k8s"
README = Path(__file__).resolve().parents[2] / "docker" / "README.md"
_API = k8s.ApiClient()


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _typed(doc: dict[str, Any]) -> Any:
    """The document as the client's typed model; it must serialize back to the same data."""
    version = doc["apiVersion"].rsplit("/", 1)[-1]
    cls = f"{version.capitalize()}{doc['kind']}"
    obj = _API._ApiClient__deserialize(doc, cls)  # the client's own loader for API responses
    assert _API.sanitize_for_serialization(obj) == doc, (
        f"{doc['kind']} {doc['metadata']['name']}: unknown fields"
    )
    return obj


@pytest.fixture(scope="module")
def kustomization() -> dict[str, Any]:
    return yaml.safe_load((K8S / "kustomization.yaml").read_text())


@pytest.fixture(scope="module")
def objects(kustomization) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in kustomization["resources"]:
        for doc in _docs(K8S / name):
            out[doc["kind"]] = _typed(doc)
    return out


@pytest.fixture(scope="module")
def pod(objects) -> k8s.V1PodSpec:
    return objects["StatefulSet"].spec.template.spec


def _container(pod: k8s.V1PodSpec, name: str) -> k8s.V1Container:
    return next(c for c in [*(pod.init_containers or []), *pod.containers] if c.name == name)


def _args(c: k8s.V1Container) -> dict[str, str]:
    return dict(a.lstrip("-").split("=", 1) for a in c.args or [] if "=" in a)


def test_every_manifest_loads_into_the_typed_models(kustomization):
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secrets.example.yaml"}
    assert listed == on_disk, "every manifest is in kustomization.yaml and nothing else is"
    kinds = []
    for name in [*listed, "secrets.example.yaml"]:
        for doc in _docs(K8S / name):
            _typed(doc)
            kinds.append(doc["kind"])
    for kind in (
        "Namespace",
        "ServiceAccount",
        "StatefulSet",
        "Service",
        "PodDisruptionBudget",
        "NetworkPolicy",
    ):
        assert kind in kinds, kind


def test_the_service_arguments_are_real_serve_flags(pod):
    sandbox = _container(pod, "sandbox")
    argv = [
        a.replace("$(POD_NAME)", "skillopt-sandbox-0").replace("$(SKILLOPT_RUNTIME_IMAGE)", "img")
        for a in sandbox.args
    ]
    args = build_parser().parse_args(["serve", *argv])
    # ... and their values are a valid host configuration (every bound checked).
    host, _ = load_host_config(None, {name: getattr(args, name) for name in HostConfig.model_fields})
    assert host.host_id == "skillopt-sandbox-0" and host.listen == "0.0.0.0:50051"
    env = {e.name: e for e in sandbox.env}
    assert env["POD_NAME"].value_from.field_ref.field_path == "metadata.name"  # one host id per pod
    # Listening beyond loopback: token and mTLS, both from Secrets.
    assert host.token_file and host.tls_cert_file and host.tls_key_file and host.tls_client_ca_file
    assert not host.insecure


def test_probes_use_grpc_health_on_the_health_only_listener(pod):
    sandbox = _container(pod, "sandbox")
    ports = {p.name: p.container_port for p in sandbox.ports}
    health_port = int(_args(sandbox)["health-listen"].rsplit(":", 1)[1])
    assert ports["health"] == health_port and ports["grpc"] == int(_args(sandbox)["listen"].rsplit(":", 1)[1])
    for probe in (sandbox.startup_probe, sandbox.readiness_probe, sandbox.liveness_probe):
        assert probe is not None and probe.grpc is not None and probe.grpc.port == health_port
    # Draining answers NOT_SERVING: readiness drops the pod from DNS at once; liveness must
    # outlast the drain so a draining host is not restarted, and the pod's grace must cover it.
    drain = float(_args(sandbox)["drain-grace"])
    live = sandbox.liveness_probe
    assert live.period_seconds * live.failure_threshold > drain
    assert pod.termination_grace_period_seconds > drain + 30
    assert sandbox.readiness_probe.period_seconds * sandbox.readiness_probe.failure_threshold <= 10


def test_metrics_are_served_on_the_annotated_port(objects, pod):
    sandbox = _container(pod, "sandbox")
    ports = {p.name: p.container_port for p in sandbox.ports}
    port = int(_args(sandbox)["metrics-listen"].rsplit(":", 1)[1])
    annotations = objects["StatefulSet"].spec.template.metadata.annotations
    assert ports["metrics"] == port == int(annotations["prometheus.io/port"])
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/path"] == "/metrics"


def test_resources_requests_and_limits_everywhere(pod):
    for c in [*pod.init_containers, *pod.containers]:
        assert c.resources and c.resources.requests and c.resources.limits, c.name
        for key in ("cpu", "memory"):
            assert key in c.resources.requests and key in c.resources.limits, (c.name, key)


def test_security_contexts(objects, pod):
    assert pod.automount_service_account_token is False and pod.enable_service_links is False
    assert objects["ServiceAccount"].automount_service_account_token is False
    assert pod.security_context.seccomp_profile.type == "RuntimeDefault"
    sandbox = _container(pod, "sandbox")
    sc = sandbox.security_context
    assert (
        not sc.privileged and sc.allow_privilege_escalation is False and sc.read_only_root_filesystem is True
    )
    assert sc.capabilities.drop == ["ALL"] and sc.capabilities.add == ["NET_ADMIN"]
    pull = _container(pod, "pull-runtime")
    assert pull.security_context.capabilities.drop == ["ALL"] and not pull.security_context.privileged
    # The one privileged container is the pod's own engine: a native sidecar, API on a unix
    # socket only (started without the image's entrypoint, which would add a TCP listener).
    engine = _container(pod, "docker")
    assert engine.restart_policy == "Always" and engine.security_context.privileged is True
    assert engine.command == ["dind", "dockerd"]
    assert (
        not any("tcp://" in a for a in engine.args) and "--host=unix:///run/docker/docker.sock" in engine.args
    )
    privileged = [
        c.name for c in [*pod.init_containers, *pod.containers] if (c.security_context or {}).privileged
    ]
    assert privileged == ["docker"]


def test_secrets_are_wired_and_stay_on_the_sandbox_container(pod):
    examples = {d["metadata"]["name"]: d for d in _docs(K8S / "secrets.example.yaml")}
    volumes = {v.name: v for v in pod.volumes}
    sandbox = _container(pod, "sandbox")
    mounts = {m.mount_path: m for m in sandbox.volume_mounts}
    secret_paths = {
        k: v
        for k, v in _args(sandbox).items()
        if k in ("token-file", "tls-cert", "tls-key", "tls-client-ca", "providers")
    }
    assert len(secret_paths) == 5
    for flag, path in secret_paths.items():
        mount_path, file = path.rsplit("/", 1)
        mount = mounts[mount_path]
        assert mount.read_only, flag
        secret = volumes[mount.name].secret
        assert secret is not None and secret.default_mode == 0o400, flag
        assert secret.secret_name in examples, (flag, secret.secret_name)
        keys = set(examples[secret.secret_name]["stringData"])
        if secret.items:
            assert file in {i.path for i in secret.items} and {i.key for i in secret.items} <= keys, flag
        else:
            assert file in keys, flag
    # Keys never travel as environment variables, and the provider profiles (with their keys)
    # are mounted in the sandbox container only: not in the engine, not in the pull step.
    for c in [*pod.init_containers, *pod.containers]:
        assert not any(e.value_from and e.value_from.secret_key_ref for e in c.env or []), c.name
        if c.name != "sandbox":
            assert not any(m.name in ("providers", "token", "tls") for m in c.volume_mounts or []), c.name


def test_the_engine_sees_the_service_paths(pod):
    """Same-path rule (docker/README.md): the engine resolves the service's bind mounts, so the
    state dir is one volume at one path in both; the engine's socket is the service's DOCKER_HOST."""
    sandbox, engine = _container(pod, "sandbox"), _container(pod, "docker")
    state = _args(sandbox)["state-dir"]
    by_path = {c.name: {m.mount_path: m.name for m in c.volume_mounts} for c in (sandbox, engine)}
    assert by_path["sandbox"][state] == by_path["docker"][state] == "state"
    docker_host = next(e.value for e in sandbox.env if e.name == "DOCKER_HOST")
    sock_dir = docker_host.removeprefix("unix://").rsplit("/", 1)[0]
    assert f"--host={docker_host}" in engine.args
    assert by_path["sandbox"][sock_dir] == by_path["docker"][sock_dir] == "docker-run"
    pull = _container(pod, "pull-runtime")
    assert next(e.value for e in pull.env if e.name == "DOCKER_HOST") == docker_host


def test_headless_service_pdb_and_policy_select_the_pods(objects, kustomization, pod):
    sts, svc = objects["StatefulSet"], objects["Service"]
    labels = sts.spec.template.metadata.labels
    assert sts.spec.selector.match_labels.items() <= labels.items()
    assert svc.spec.cluster_ip == "None" and svc.spec.publish_not_ready_addresses is False
    assert sts.spec.service_name == svc.metadata.name
    assert svc.spec.selector.items() <= labels.items()
    (port,) = svc.spec.ports
    assert port.target_port == "grpc" and port.port == 50051
    assert objects["PodDisruptionBudget"].spec.max_unavailable == 1
    assert objects["PodDisruptionBudget"].spec.selector.match_labels.items() <= labels.items()
    policy = objects["NetworkPolicy"].spec
    assert policy.pod_selector.match_labels.items() <= labels.items()
    # The controller reaches gRPC only; Prometheus the metrics port only.
    admitted = {
        p.port: [f.pod_selector.match_labels for f in rule._from]
        for rule in policy.ingress
        for p in rule.ports
    }
    assert admitted == {
        "grpc": [{"app.kubernetes.io/component": "skillopt-controller"}],
        "metrics": [{"app.kubernetes.io/name": "prometheus"}],
    }
    metrics_port = {
        p.name: p.container_port for c in sts.spec.template.spec.containers for p in c.ports or []
    }
    assert "metrics" in metrics_port
    blocked = [e for rule in policy.egress for t in rule.to if t.ip_block for e in t.ip_block._except or []]
    assert "169.254.169.254/32" in blocked
    # The endpoint string the controller is given, as documented.
    endpoint = f"dns:///{svc.metadata.name}.{kustomization['namespace']}.svc.cluster.local:{port.port}"
    assert endpoint in (K8S / "service.yaml").read_text()
    assert endpoint in README.read_text()
    assert re.search(r"replicas: \d+", (K8S / "statefulset.yaml").read_text())
