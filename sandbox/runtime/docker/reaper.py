"""Removing what this host no longer owns: containers of a crashed predecessor, expired ones,
those of owners that are provably gone, their exec-agent networks, and orphaned directories."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors
import structlog

from sandbox.runtime.base import ReapReport
from sandbox.runtime.docker.engine import Engine, list_containers
from sandbox.runtime.docker.network import remove_host_network
from sandbox.runtime.docker.statedir import StateDir
from sandbox.runtime.labels import LABEL_EXPIRES, LABEL_HOST, LABEL_INSTANCE, LABEL_MANAGED, LABEL_OWNER
from sandbox.runtime.owner import Owner, owner_gone
from skillopt.errors import SandboxUnavailable

__all__ = ["Reaper", "sweep_host"]

log = structlog.get_logger("skillopt.sandbox.runtime")

#: A container or directory younger than this may still be in creation: never unknown yet.
_GRACE_S = 120.0


class Reaper:
    """The reaping of one runtime instance (``instance`` of host ``host_id``, owned by
    ``owner``); ``live()`` returns the names and directories of the containers it holds."""

    def __init__(
        self,
        engine: Engine,
        state: StateDir,
        *,
        host_id: str,
        instance: str,
        owner: Owner,
        live: Callable[[], tuple[set[str], set[str]]],
    ) -> None:
        self.engine, self.state = engine, state
        self.host_id, self.instance, self.owner = host_id, instance, owner
        self._live = live

    def reap(self, *, startup: bool = False) -> ReapReport:
        """Remove containers and directories this host no longer owns.

        On startup (and again at close, once our own containers are gone) every container
        labelled with this host id belongs to a previous instance (crash, ``kill -9``) and is
        removed. Periodically: containers of other instances of this host, containers of ours
        the runtime does not know, and expired containers of any skillopt host. At any time:
        containers and exec-agent networks of any host id whose owning process is provably gone
        (a SIGKILLed host, a killed CLI; see :mod:`sandbox.runtime.owner`). Directories without
        a live container go too.
        """
        try:
            containers = list_containers(self.engine.client, f"{LABEL_MANAGED}=1")
        except docker.errors.DockerException as exc:
            log.warning("reaper.list_failed", error=str(exc))
            return ReapReport((), ())
        live, _ = self._live()
        gone = self._owner_check()
        doomed: dict[str, str] = {}  # id -> name
        now = time.time()
        for c in containers:
            reason = self._reason(c.labels, c.name, c.created, now, startup=startup, live=live, gone=gone)
            if reason:
                doomed[c.id] = c.name
                log.info("reaper.removed", container=c.name, reason=reason)
        self.engine.remove_all(list(doomed))
        self._reap_networks(gone, busy={c.labels.get(LABEL_HOST) for c in containers if c.id not in doomed})
        return ReapReport(tuple(doomed.values()), self._reap_directories(startup=startup))

    def _reason(
        self,
        labels: dict[str, str],
        name: str,
        created: float,
        now: float,
        *,
        startup: bool,
        live: set[str],
        gone: Callable[[str | None], bool],
    ) -> str:
        """Why a container goes ("" if it stays)."""
        ours = labels.get(LABEL_HOST) == self.host_id
        if ours and (startup or labels.get(LABEL_INSTANCE) != self.instance):
            return "previous-instance"
        if ours and name not in live and now - created > _GRACE_S:
            return "unknown-to-runtime"
        if _as_float(labels.get(LABEL_EXPIRES)) < now:
            return "expired"
        if not ours and gone(labels.get(LABEL_OWNER)):
            return "owner-gone"
        return ""

    def _reap_directories(self, *, startup: bool) -> tuple[str, ...]:
        _, live_dirs = self._live()
        removed = []
        for d in self.state.container_dirs():
            if d.name not in live_dirs and (startup or _mtime_age(d) > _GRACE_S):
                self.state.remove(d)
                removed.append(d.name)
        return tuple(removed)

    def _owner_check(self) -> Callable[[str | None], bool]:
        """``gone(label)`` for one reap: each owner decided once (an engine lookup for owners
        that run in a container; an engine error decides "alive")."""
        decided: dict[str, bool] = {self.owner.label(): False}

        def gone(label: str | None) -> bool:
            if not label:
                return False
            if label not in decided:
                try:
                    decided[label] = owner_gone(label, self.owner, self.engine.running_since)
                except docker.errors.DockerException:
                    decided[label] = False
            return decided[label]

        return gone

    def _reap_networks(self, gone: Callable[[str | None], bool], busy: set[str | None]) -> None:
        """Remove exec-agent networks (and their firewall rules) whose owner is gone, unless a
        container of their host id remains (``busy``)."""
        client = self.engine.client
        try:
            networks = client.api.networks(filters={"label": f"{LABEL_MANAGED}=1"})
        except docker.errors.DockerException as exc:
            log.warning("reaper.list_failed", error=str(exc))
            return
        for net in networks:
            labels = net.get("Labels") or {}
            host = labels.get(LABEL_HOST, "")
            mine_or_busy = not host or host in busy or host == self.host_id
            if not mine_or_busy and gone(labels.get(LABEL_OWNER)) and remove_host_network(client, host):
                log.info("reaper.removed_network", network=net.get("Name"), reason="owner-gone")


def sweep_host(host_id: str) -> None:
    """Remove every container and the exec-agent network of sandbox host ``host_id`` on the
    local engine, whoever created them (a service this process started and lost).

    Raises:
        SandboxUnavailable: the engine cannot be reached.
    """
    try:
        client = docker.from_env()
    except docker.errors.DockerException as exc:
        raise SandboxUnavailable(f"cannot reach the Docker engine ({exc})") from exc
    try:
        for c in list_containers(client, f"{LABEL_HOST}={host_id}"):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(c.id, force=True)
        remove_host_network(client, host_id)
    finally:
        client.close()


def _as_float(value: str | None) -> float:
    try:
        return float(value) if value is not None else float("inf")
    except ValueError:
        return float("inf")


def _mtime_age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0
