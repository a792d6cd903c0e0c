"""Endpoints by DNS name: ``dns:///NAME:PORT`` is every address NAME resolves to, one host each.

That is how a Kubernetes headless Service (``docker/k8s/``) or any round-robin DNS name is used:
the fleet re-resolves the name while it runs, so pods that come and go join and leave it. A
plain ``host:port`` (or ``unix:/path``) is one host, as before.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import replace

from controller.client.sandbox_client import ChannelConfig
from skillopt.errors import ConfigError

__all__ = ["DNS_SCHEME", "expand", "is_dns", "parse_dns"]

DNS_SCHEME = "dns:///"


def is_dns(address: str) -> bool:
    return address.startswith(DNS_SCHEME)


def parse_dns(address: str) -> tuple[str, int]:
    """``dns:///NAME:PORT`` → ``(NAME, PORT)``.

    Raises:
        ConfigError: not of that form.
    """
    rest = address[len(DNS_SCHEME) :]
    name, sep, port = rest.rpartition(":")
    if not sep or not name or not port.isdigit() or not 1 <= int(port) <= 65535 or "/" in name:
        raise ConfigError(f'expected "dns:///NAME:PORT" (port 1-65535), got {address!r}')
    return name.strip("[]"), int(port)


def _host_port(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ipaddress.ip_address(ip).version == 6 else f"{ip}:{port}"


def expand(channel: ChannelConfig) -> list[ChannelConfig]:
    """The hosts behind one endpoint: itself, or one channel per address its name resolves to
    (sorted, so the order is stable). TLS still verifies the certificate against the name.

    Raises:
        ConfigError: a malformed ``dns:///`` endpoint.
    """
    if not is_dns(channel.address):
        return [channel]
    name, port = parse_dns(channel.address)
    try:
        infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return []  # nothing behind the name right now (pods not up yet): the fleet re-resolves
    ips = sorted({info[4][0] for info in infos})
    return [
        replace(channel, address=_host_port(str(ip), port), tls_server_name=channel.tls_server_name or name)
        for ip in ips
    ]
