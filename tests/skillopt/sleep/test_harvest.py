"""The harvest over the corpus: what it writes, that no secret gets there, that a second run
does nothing, that a grown session is taken again, and that bad input is reported and never
costs what was harvested before."""

from __future__ import annotations

import dataclasses
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest

from skillopt.errors import ConfigError
from skillopt.sleep import HarvestedSession, HarvestIndex, harvest, parse_since
from skillopt.sleep.redact import KINDS
from skillopt.testing.sleep_corpus import grow
from tests.skillopt.sleep.conftest import NOW

USABLE = 7  # sessions of the corpus that give a record (three are in unknown formats)


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def index_of(out: Path) -> HarvestIndex:
    return HarvestIndex.model_validate_json((out / "index.json").read_bytes())


def test_every_usable_session_gets_one_record_listed_in_the_index(corpus, config):
    result = harvest(config)
    assert (result.seen, len(result.harvested), result.unchanged) == (10, USABLE, 0)
    index = index_of(config.out)
    assert len(index.sessions) == USABLE
    for entry in index.sessions:
        record = HarvestedSession.model_validate_json((config.out / entry.record).read_bytes())
        assert (record.source, record.session_id, record.sha256) == (
            entry.source,
            entry.session_id,
            entry.sha256,
        )
        assert Path(record.source_path).read_bytes()  # the transcript, left where it was
    assert (
        sorted(p.relative_to(config.out).parts[0] for p in files_under(config.out))
        == ["index.json"] + ["sessions"] * USABLE
    )


def test_no_planted_secret_reaches_any_written_file(corpus, config):
    result = harvest(dataclasses.replace(config, include_tool_output=True))
    written = b"".join(p.read_bytes() for p in files_under(config.out))
    for kind, secret in corpus.secrets:
        for form in (secret, json.dumps(secret)[1:-1]):
            assert form.encode() not in written, (kind, secret)
    assert set(result.redactions) == set(KINDS)  # every kind was planted and found
    assert b"[REDACTED:private_key]" in written


def test_transcripts_are_only_read(corpus, config):
    before = {s.path: (s.path.read_bytes(), s.path.stat().st_mtime_ns) for s in corpus.sessions}
    harvest(config)
    assert {s.path: (s.path.read_bytes(), s.path.stat().st_mtime_ns) for s in corpus.sessions} == before


def test_a_second_harvest_does_nothing(corpus, config):
    harvest(config)
    index = (config.out / "index.json").read_bytes()
    records = {p: p.stat().st_mtime_ns for p in files_under(config.out)}
    again = harvest(config)
    assert (len(again.harvested), again.unchanged, again.replaced) == (0, USABLE, 0)
    assert (config.out / "index.json").read_bytes() == index
    assert {p: p.stat().st_mtime_ns for p in files_under(config.out)} == records


def test_a_session_whose_file_grew_is_harvested_again_and_replaces_its_record(corpus, config):
    harvest(config)
    session = corpus.session("cx-skill-retry")
    grow(session, "now also update the README", "README updated.")
    again = harvest(config)
    assert again.harvested == (("codex", session.session_id),) and again.replaced == 1
    entries = [e for e in index_of(config.out).sessions if e.session_id == session.session_id]
    assert len(entries) == 1
    record = HarvestedSession.model_validate_json((config.out / entries[0].record).read_bytes())
    assert record.turns[-1].text == "README updated." and record.sha256 == entries[0].sha256
    assert len(index_of(config.out).sessions) == USABLE


def test_a_touched_but_unchanged_file_is_not_harvested_again(corpus, config):
    harvest(config)
    path = corpus.session("cc-skill").path
    os.utime(path, (1_900_000_000, 1_900_000_000))
    again = harvest(config)
    assert (len(again.harvested), again.unchanged) == (0, USABLE)
    entry = next(e for e in index_of(config.out).sessions if e.source_path == str(path))
    assert entry.mtime_ns == path.stat().st_mtime_ns  # the next harvest skips it without hashing


def test_bad_input_is_counted_and_reported_never_fatal(corpus, config):
    dangling = corpus.codex_dir / "sessions" / "2026" / "12" / "01" / "rollout-2026-12-01T00-00-00-x.jsonl"
    dangling.parent.mkdir(parents=True)
    dangling.symlink_to(dangling.parent / "gone.jsonl")
    result = harvest(config)
    assert len(result.harvested) == USABLE
    reasons = sorted(s.reason for s in result.skipped)
    assert reasons == ["unknown format version"] * 3 + ["unreadable"]
    assert next(s for s in result.skipped if s.reason == "unreadable").path == str(dangling)
    assert result.lines_skipped == 2  # cc-damaged: a corrupt line and a cut-off last line
    damaged = corpus.session("cc-damaged")
    record = next(e for e in index_of(config.out).sessions if e.session_id == damaged.session_id)
    assert HarvestedSession.model_validate_json((config.out / record.record).read_bytes()).lines_skipped == 2


def test_a_transcript_that_goes_bad_keeps_its_earlier_record(corpus, config):
    harvest(config)
    session = corpus.session("cc-correction")
    before = index_of(config.out)
    session.path.write_text('{"not": "a transcript"\n', encoding="utf-8")
    again = harvest(config)
    assert [s.reason for s in again.skipped if s.path == str(session.path)] == ["no conversation"]
    assert index_of(config.out) == before
    entry = next(e for e in before.sessions if e.session_id == session.session_id)
    assert HarvestedSession.model_validate_json((config.out / entry.record).read_bytes()).task


def test_a_damaged_index_is_rebuilt_from_the_records(corpus, config):
    harvest(config)
    (config.out / "index.json").write_text("{ cut off", encoding="utf-8")
    again = harvest(config)
    assert "rebuilt it from the 7 session records" in again.index_note
    assert (len(again.harvested), again.unchanged) == (0, USABLE)
    assert len(index_of(config.out).sessions) == USABLE


def test_a_missing_source_folder_is_reported_and_the_other_harvested(corpus, config, tmp_path):
    roots = dict(config.roots, codex=tmp_path / "no-codex" / "sessions")
    result = harvest(dataclasses.replace(config, roots=roots))
    assert result.missing == (("codex", tmp_path / "no-codex" / "sessions"),)
    assert {s for s, _ in result.harvested} == {"claude-code"}


def test_no_source_folder_at_all_is_a_config_error_naming_each(tmp_path):
    from skillopt.sleep import HarvestConfig

    config = HarvestConfig(
        roots={"claude-code": tmp_path / "a", "codex": tmp_path / "b"}, out=tmp_path / "out"
    )
    with pytest.raises(ConfigError, match="CLAUDE_CONFIG_DIR") as err:
        harvest(config)
    assert "CODEX_HOME" in err.value.message and str(tmp_path / "a") in err.value.message
    assert not (tmp_path / "out").exists()


def test_since_keeps_recent_sessions(corpus, config):
    result = harvest(dataclasses.replace(config, since=NOW - timedelta(days=5)))
    names = {s.name for s in corpus.sessions if (s.source, s.session_id) in set(result.harvested)}
    assert names == {"cc-skill", "cc-correction", "cc-damaged", "cc-huge", "cx-skill-retry"}
    assert result.filtered == {"--since": 3}  # cc-abandoned, cx-abandoned, cx-legacy


def test_project_keeps_sessions_in_that_folder_or_below(corpus, config):
    result = harvest(dataclasses.replace(config, project=Path("/home/dev/webapp")))
    names = {s.name for s in corpus.sessions if (s.source, s.session_id) in set(result.harvested)}
    assert names == {"cc-skill", "cc-damaged", "cx-skill-retry"}
    # A folder whose name merely starts the same is not inside it.
    none = harvest(dataclasses.replace(config, project=Path("/home/dev/web"), out=config.out / "x"))
    assert none.harvested == ()


def test_a_dry_run_previews_redacted_records_and_writes_nothing(corpus, config):
    seen: list[HarvestedSession] = []
    result = harvest(dataclasses.replace(config, dry_run=True), preview=seen.append)
    assert len(seen) == len(result.harvested) == USABLE
    assert not config.out.exists()
    text = json.dumps([s.model_dump(mode="json") for s in seen])
    assert all(secret not in text for _, secret in corpus.secrets)


@pytest.mark.parametrize(
    ("text", "days"),
    [("7d", 7), ("24h", 1), ("2w", 14), ("90m", 90 / 1440)],
)
def test_since_spans(text, days):
    assert parse_since(text, NOW) == NOW - timedelta(days=days)


def test_since_dates_and_bad_values():
    assert parse_since("2026-12-01", NOW).isoformat() == "2026-12-01T00:00:00+00:00"
    with pytest.raises(ConfigError, match="30m, 24h, 7d, 2w"):
        parse_since("last week", NOW)
