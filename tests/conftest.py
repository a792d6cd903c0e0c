"""Shared fixtures: a real Docker runtime, a real scripted model server, a real sandbox service
on a real socket. Nothing here is mocked; when Docker or the runtime image is missing the tests
fail with instructions (CI's .ci/run sets both up)."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from sandbox.runtime.spec import DEFAULT_IMAGE

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        pytest.fail(f"Docker engine not reachable ({exc}); run: bash scripts/setup.sh", pytrace=False)
    try:
        client.images.get(DEFAULT_IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"runtime image {DEFAULT_IMAGE} missing; run: bash docker/build.sh", pytrace=False)
    yield client
    client.close()


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A short temp dir (unix socket paths must fit in 108 bytes; pytest's tmp_path is long)."""
    path = Path(tempfile.mkdtemp(prefix="so-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def token() -> str:
    return secrets.token_urlsafe(24)
