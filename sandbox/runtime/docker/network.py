"""The internal Docker network of exec-agent containers, and the host firewall around it.

Exec agents (Codex CLI, Claude Code) need a model, so their containers cannot use
``network_mode=none``. They join one internal bridge network per sandbox host: no route out
(Docker's ``internal``), no traffic between containers (``enable_icc=false``), and host INPUT
rules that drop everything arriving from the bridge except TCP to the gateway's port. So the
only thing such a container can reach is the gateway.

Needs root (iptables); without it exec agents are disabled with that reason.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import subprocess

import docker
import docker.errors
import structlog

from sandbox.runtime.labels import LABEL_HOST, LABEL_MANAGED, LABEL_OWNER
from skillopt.errors import ConfigError

__all__ = ["GatewayNetwork", "network_name", "remove_host_network"]

log = structlog.get_logger("skillopt.sandbox.gateway")


def network_name(host_id: str) -> str:
    """The exec-agent network of sandbox host ``host_id``."""
    return f"skillopt-gw-{host_id}"


def _flush_rules(iptables: str, name: str) -> int:
    """Delete every INPUT rule tagged for network ``name``; returns how many."""
    listing = subprocess.run([iptables, "-w", "-S", "INPUT"], capture_output=True, text=True).stdout
    n = 0
    for line in listing.splitlines():
        if f"skillopt {name}" in line and line.startswith("-A "):
            subprocess.run([iptables, "-w", "-D", *shlex.split(line[3:])], capture_output=True)
            n += 1
    return n


def remove_host_network(client: docker.DockerClient, host_id: str) -> bool:
    """Remove what a dead instance of host ``host_id`` left of its exec-agent network: the
    firewall rules and the network itself (its containers must be gone first). Returns
    whether anything was there."""
    name = network_name(host_id)
    iptables = shutil.which("iptables")
    found = bool(iptables and _flush_rules(iptables, name))
    try:
        client.networks.get(name).remove()
        found = True
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        log.warning("gateway.network_remove_failed", network=name, error=str(exc))
    return found


class GatewayNetwork:
    """Create (or adopt) the host's exec-agent network and firewall it to one port."""

    def __init__(self, client: docker.DockerClient, host_id: str, owner_label: str = "") -> None:
        self.client = client
        self.name = network_name(host_id)
        # Linux interface names are at most 15 characters.
        self.bridge = "sogw" + hashlib.sha256(host_id.encode()).hexdigest()[:10]
        self.port: int | None = None
        self._iptables = shutil.which("iptables")
        if self._iptables is None:
            raise ConfigError("exec agents need iptables on the sandbox host (apt-get install iptables)")
        try:
            net = self.client.networks.get(self.name)
            if (net.attrs.get("Labels") or {}).get(LABEL_OWNER, "") != owner_label:
                # A previous instance's network, labelled with a dead owner: other hosts would
                # sweep it (and its firewall rules) from under us. Its containers are reaped by
                # now, so it can go; if it cannot, it is adopted (swept only once idle).
                try:
                    net.remove()
                except docker.errors.APIError as exc:
                    log.warning("gateway.network_adopted", network=self.name, error=str(exc))
                else:
                    raise docker.errors.NotFound(self.name)
        except docker.errors.NotFound:
            net = self.client.networks.create(
                self.name,
                driver="bridge",
                internal=True,
                options={
                    "com.docker.network.bridge.enable_icc": "false",
                    "com.docker.network.bridge.name": self.bridge,
                },
                labels={LABEL_MANAGED: "1", LABEL_HOST: host_id, LABEL_OWNER: owner_label},
            )
        net.reload()
        config = (net.attrs.get("IPAM") or {}).get("Config") or [{}]
        self.gateway_ip = config[0].get("Gateway", "")
        if not self.gateway_ip:
            raise ConfigError(f"docker network {self.name} has no gateway address")
        self.bridge = (net.attrs.get("Options") or {}).get("com.docker.network.bridge.name", self.bridge)

    def _rules(self, port: int) -> list[list[str]]:
        return [
            ["INPUT", "-i", self.bridge, "-j", "DROP", "-m", "comment", "--comment", f"skillopt {self.name}"],
            [
                "INPUT",
                "-i",
                self.bridge,
                "-p",
                "tcp",
                "--dport",
                str(port),
                "-j",
                "ACCEPT",
                "-m",
                "comment",
                "--comment",
                f"skillopt {self.name}",
            ],
        ]

    def _run(self, *args: str) -> bool:
        assert self._iptables is not None
        out = subprocess.run([self._iptables, "-w", *args], capture_output=True, text=True)
        return out.returncode == 0

    def firewall(self, port: int) -> None:
        """Allow only ``port`` on the bridge (inserted in order: ACCEPT ends up above DROP).

        Raises:
            ConfigError: iptables refused (not root?).
        """
        self.port = port
        self._flush_stale()
        for rule in self._rules(port):
            if not self._run("-C", *rule) and not self._run("-I", *rule):
                raise ConfigError(
                    f"cannot install the firewall rule for {self.name} (iptables -I {' '.join(rule)} failed; run the service as root)"
                )
        log.info("gateway.network", network=self.name, bridge=self.bridge, ip=self.gateway_ip, port=port)

    def _flush_stale(self) -> None:
        """Remove rules a previous instance of this host left (another gateway port)."""
        assert self._iptables is not None
        _flush_rules(self._iptables, self.name)

    def close(self) -> None:
        if self.port is not None:
            for rule in self._rules(self.port):
                while self._run("-C", *rule):
                    self._run("-D", *rule)
        try:
            self.client.networks.get(self.name).remove()
        except docker.errors.APIError as exc:  # containers still attached: the reaper retries
            log.warning("gateway.network_remove_failed", network=self.name, error=str(exc))
