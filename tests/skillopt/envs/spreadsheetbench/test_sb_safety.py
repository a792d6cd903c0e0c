"""An untrusted prediction never makes the grader raise: each problem is a verdict with a reason."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from sb_xlsx import build_xlsx

from skillopt.envs.spreadsheetbench.evaluator import GradingLimits, grade_case

MakeXlsx = Callable[..., Path]


@pytest.fixture
def gold(make_xlsx: MakeXlsx) -> Path:
    return make_xlsx({"S": {"A1": 1}}, name="gold.xlsx")


def _unreadable(pred: object, gold: Path, **kwargs: object) -> str:
    v = grade_case(pred, gold, "A1", **kwargs)  # type: ignore[arg-type]
    assert not v.ok and v.stage == "output" and v.n_cells == 0
    return v.reason


def test_missing_file(gold: Path, tmp_path: Path) -> None:
    assert _unreadable(tmp_path / "nope.xlsx", gold) == "file not exist"


def test_not_a_zip(gold: Path, tmp_path: Path) -> None:
    path = tmp_path / "out.xlsx"
    path.write_text("id,value\n1,2\n")
    assert _unreadable(path, gold) == "cannot read prediction: not an xlsx file (not a zip archive)"
    ole = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 100  # a legacy .xls / encrypted workbook
    assert "legacy .xls" in _unreadable(ole, gold)
    assert "not a zip archive" in _unreadable(b"", gold)


def test_truncated_zip(gold: Path) -> None:
    data = build_xlsx({"S": {"A1": 1}})
    reason = _unreadable(data[: len(data) // 2], gold)
    assert reason.startswith("cannot read prediction: broken zip archive")


def test_zip_that_is_not_a_workbook(gold: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("hello.txt", "hi")
    assert _unreadable(buf.getvalue(), gold).startswith("cannot read prediction: ")


def test_malformed_sheet_xml_inside_a_valid_workbook(gold: Path) -> None:
    data = _rewrite_member(
        build_xlsx({"S": {"A1": 1}}), "xl/worksheets/sheet1.xml", b"<worksheet><sheetData><row"
    )
    assert _unreadable(data, gold).startswith("cannot read prediction: ")


def test_xml_entity_bomb_is_refused(gold: Path) -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
        b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
        b'<sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>&lol2;</t></is></c></row></sheetData></worksheet>'
    )
    data = _rewrite_member(build_xlsx({"S": {"A1": 1}}), "xl/worksheets/sheet1.xml", bomb)
    reason = _unreadable(data, gold)
    assert "EntitiesForbidden" in reason or "DTDForbidden" in reason


def test_too_many_members(gold: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(60):
            zf.writestr(f"junk/{i}.txt", "")
    reason = _unreadable(buf.getvalue(), gold, limits=GradingLimits(max_members=50))
    assert reason == "cannot read prediction: 60 zip members exceeds 50"


def test_uncompressed_size_bomb(gold: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", b"<x/>")
        zf.writestr("xl/zeros.bin", b"\0" * (8 * 1024 * 1024))  # compresses to ~8 KB
    data = buf.getvalue()
    assert len(data) < 100_000
    reason = _unreadable(data, gold, limits=GradingLimits(max_uncompressed_bytes=1024 * 1024))
    assert reason.startswith("cannot read prediction: uncompressed size ") and "exceeds 1048576" in reason


def test_understated_member_size_cannot_inflate(gold: Path) -> None:
    """The size cap trusts the declared sizes because zipfile stops at them: a member that
    claims 1000 bytes but inflates to 8 MiB fails its CRC instead of being read in full."""
    import struct

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("xl/big.bin", b"\0" * (8 * 1024 * 1024))
    data = buf.getvalue().replace(struct.pack("<I", 8 * 1024 * 1024), struct.pack("<I", 1000))
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.getinfo("xl/big.bin").file_size == 1000
        with pytest.raises(zipfile.BadZipFile, match="CRC"):
            zf.read("xl/big.bin")


def test_file_size_cap(gold: Path, tmp_path: Path) -> None:
    path = tmp_path / "big.xlsx"
    path.write_bytes(build_xlsx({"S": {"A1": 1}}))
    reason = _unreadable(path, gold, limits=GradingLimits(max_file_bytes=100))
    assert "exceeds 100" in reason


def test_symlink_is_refused_even_to_the_gold(gold: Path, tmp_path: Path) -> None:
    link = tmp_path / "out.xlsx"
    link.symlink_to(gold)  # a model could point its output at the answer
    assert _unreadable(link, gold) == "cannot read prediction: output path is a symlink"


def test_directory_and_fifo_are_refused(gold: Path, tmp_path: Path) -> None:
    folder = tmp_path / "dir.xlsx"
    folder.mkdir()
    assert _unreadable(folder, gold) == "cannot read prediction: output path is not a regular file"
    fifo = tmp_path / "fifo.xlsx"
    os.mkfifo(fifo)  # reading it would block forever
    assert _unreadable(fifo, gold) == "cannot read prediction: output path is not a regular file"


def test_answer_area_cap(make_xlsx: MakeXlsx, gold: Path) -> None:
    pred = make_xlsx({"S": {"A1": 1, "A5000": 1}})
    v = grade_case(pred, gold, "A:Z", limits=GradingLimits(max_cells=10_000))
    assert not v.ok and v.reason == "answer area of 130000 cells exceeds the cap of 10000"


def test_lying_dimension_tag_is_ignored(gold: Path) -> None:
    """A claimed A1:XFD1048576 must not make the grader allocate the whole sheet."""
    data = _rewrite_member(
        build_xlsx({"S": {"A1": 1}}),
        "xl/worksheets/sheet1.xml",
        None,
        replace=(b'<dimension ref="A1:A1" />', b'<dimension ref="A1:XFD1048576" />'),
    )
    v = grade_case(data, gold, "A1")
    assert v.ok, v.reason


def _rewrite_member(
    data: bytes, member: str, content: bytes | None, *, replace: tuple[bytes, bytes] = (b"", b"")
) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            body = src.read(info.filename)
            if info.filename == member:
                if content is not None:
                    body = content
                else:
                    assert replace[0] in body, body[:400]
                    body = body.replace(*replace)
            dst.writestr(info, body)
    return out.getvalue()
