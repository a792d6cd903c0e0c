"""``read_output``: an output the program may or may not have written, read from a real
container. Nothing there and "not a regular file" both read as ``None`` (a refusal is logged);
an oversize file raises; underneath, ``read_file`` itself raises for all three."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.runtime.fresh import local_grading_sandboxes
from skillopt.agents.sandbox import Sandbox, read_output
from skillopt.errors import OutputLimitExceeded, SandboxFileMissing, SandboxFileRefused

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def box(docker_client) -> Iterator[Sandbox]:
    with local_grading_sandboxes() as fresh, fresh() as leased:
        yield leased


def test_a_written_output_reads_as_its_bytes(box):
    data = b"\x00\xff" + bytes(range(256))
    box.write_file("out/result.bin", data)
    assert read_output(box, "out/result.bin", max_bytes=len(data)) == data


def test_nothing_there_reads_as_none(box):
    assert read_output(box, "never-written.txt", max_bytes=64) is None
    assert read_output(box, "no/such/dir/file.txt", max_bytes=64) is None
    with pytest.raises(SandboxFileMissing):
        box.read_file("never-written.txt", max_bytes=64)


def test_a_link_a_directory_or_a_pipe_reads_as_none_and_each_refusal_is_logged(box, log_events):
    made = box.run_command(
        ["sh", "-c", "ln -s /etc/passwd planted && ln -s /etc linked && mkdir folder && mkfifo pipe"],
        timeout_s=30,
    )
    assert made.ok, made.stderr_tail
    refused = ("planted", "linked/passwd", "folder", "pipe")
    for path in refused:
        assert read_output(box, path, max_bytes=1 << 20) is None, path
    assert [(e["event"], e["path"]) for e in log_events] == [("sandbox.read_refused", p) for p in refused]
    for path in refused:
        with pytest.raises(SandboxFileRefused):
            box.read_file(path, max_bytes=1 << 20)


def test_an_output_larger_than_asked_for_raises(box):
    box.write_file("big.txt", b"x" * 100)
    with pytest.raises(OutputLimitExceeded):
        read_output(box, "big.txt", max_bytes=99)
    assert read_output(box, "big.txt", max_bytes=100) == b"x" * 100
