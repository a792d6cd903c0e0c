"""The redactor of harvested text: every kind of secret goes, ordinary coding text stays, and
redacting twice changes nothing."""

from __future__ import annotations

import json
import random
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skillopt.sleep.redact import KINDS, Redactor, looks_random
from skillopt.testing.fake_secrets import fake
from skillopt.testing.sleep_corpus import SECRETS

#: (text, kind, what must be gone, what must stay)
SECRET_CASES = [
    (fake("key sk-", "abc123abc123abc123abc123 end"), "openai_key", "abc123abc123abc123abc123", "key "),
    (
        fake("OPENAI_API_KEY=sk-", "proj-abcdefghijklmnopqrstuvwxyz0123"),
        "openai_key",
        "abcdefghijklmnop",
        "OPENAI_API_KEY=",
    ),
    (fake("sk-", "ant-api03-abcdefghijklmnopqrstuvwxyz0123"), "anthropic_key", "api03-abcdefghijklm", ""),
    (
        fake("token gh", "p_abcdefghijklmnopqrstuvwxyz0123456789"),
        "github_token",
        "abcdefghijklmnop",
        "token ",
    ),
    (
        fake("github", "_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwx"),
        "github_token",
        "11ABCDEFG01234",
        "",
    ),
    (fake("aws AK", "IAIOSFODNN7EXAMPLE here"), "aws_access_key", "IOSFODNN7EXAMPLE", "aws "),
    (fake("xo", "xb-1234567890-abcdefghij"), "slack_token", "1234567890-abcdefghij", ""),
    (
        fake(
            "jwt eyJhbGciOiJIUzI1NiJ9",
            ".eyJzdWIiOiIxMjM0NTY3ODkwIn0",
            ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        ),
        "jwt",
        "dozjgNryP4J3jVmNHl0w5N",
        "jwt ",
    ),
    (
        "git clone https://alice:s3cretPass@github.com/x/y.git",
        "url_credentials",
        "s3cretPass",
        "@github.com/x/y.git",
    ),
    (
        'curl -H "Authorization: Bearer abcdefgh12345678"',
        "bearer",
        "abcdefgh12345678",
        "Authorization: Bearer ",
    ),
    ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "bearer", "YWxhZGRpbjpvcGVuc2VzYW1l", "Basic "),
    (
        fake("-----BEGIN RSA PRI", "VATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRI", "VATE KEY-----"),
        "private_key",
        "MIIEow",
        "",
    ),
    (
        fake("-----BEGIN OPENSSH PRI", "VATE KEY-----\nb3BlbnNzaC1rZXktdjEA (cut off here"),
        "private_key",
        "b3BlbnNzaC1r",
        "",
    ),
    ("db password=hunter2secret; next", "secret_assignment", "hunter2secret", "db password="),
    ('{"client_secret": "abcd1234xyz"}', "secret_assignment", "abcd1234xyz", '"client_secret": "'),
    ("api_key: zzz999zzz", "secret_assignment", "zzz999zzz", "api_key: "),
    ("export GITHUB_TOKEN=plainvalue42", "secret_assignment", "plainvalue42", "export GITHUB_TOKEN="),
    ("aws_secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "high_entropy", "K7MDENG", "aws_secret "),
    (
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk",
        "high_entropy",
        "iVBORw0K",
        "",
    ),
]


@pytest.mark.parametrize(
    ("text", "kind", "gone", "kept"), SECRET_CASES, ids=[c[1] + str(i) for i, c in enumerate(SECRET_CASES)]
)
def test_each_kind_of_secret_is_replaced_and_counted(text, kind, gone, kept):
    r = Redactor()
    out = r.text(text)
    assert gone not in out
    assert f"[REDACTED:{kind}]" in out
    assert kept in out
    assert r.counts[kind] >= 1


#: Ordinary text of a coding session that must come through untouched.
KEPT = [
    "/usr/lib/python3/dist-packages/some_module/__init__.py",
    "session 01a252b8-d72b-7a91-b408-c68cc94ce04e resumed",
    "commit 3ebe4a0f8e9d1c2b3a4f5e6d7c8b9a0f1e2d3c4b",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "test_planted_secrets_never_survive release-2024-11-03 snake_case_with_digits_v2_final",
    "tests/skillopt/sleep/test_redact_v2.py src/components/theme_toggle.tsx",
    "/tmp/pytest-of-root/pytest-12/test_harvest_is_idempotent0/out/index.json",
    "max_tokens=100 token_count=5 password=None password=$DB_PASSWORD api_key: ${API_KEY}",
    "the password: <your password here>",
    "ThisIsAVeryLongCamelCaseIdentifierName and https://github.com/openai/codex",
    "npm test -- --coverage; pytest -k 'not slow' -x",
]


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_coding_text_is_kept(text):
    r = Redactor()
    assert r.text(text) == text
    assert sum(r.counts.values()) == 0


#: How each kind is written around its secret (the others stand alone).
CONTEXT = {
    "secret_assignment": "password={}",
    "url_credentials": "https://deploy:{}@git.example.com/r.git",
    "bearer": "Authorization: Bearer {}",
}


@pytest.mark.parametrize(("kind", "secret"), SECRETS)
def test_the_corpus_planted_secrets_are_caught_in_context_and_inside_json(kind, secret):
    text = CONTEXT.get(kind, "{}").format(secret)
    for form in (text, f"'{text}'", json.dumps({"cmd": f"echo {text} | tee log"}), f"x\n{text}\ny"):
        out = Redactor().text(form)
        assert secret not in out, form


def test_redacting_twice_changes_nothing():
    r = Redactor()
    once = r.text(" ".join(c[0] for c in SECRET_CASES))
    counts = dict(r.counts)
    assert r.text(once) == once
    assert dict(r.counts) == counts


def test_nested_data_is_redacted_and_keys_kept():
    r = Redactor()
    out = r.data({"api_key": [fake("sk-", "abc123abc123abc123abc123"), 3], "n": None})
    assert out == {"api_key": ["[REDACTED:openai_key]", 3], "n": None}


def test_kinds_are_listed_in_rule_order():
    assert KINDS[0] == "private_key" and KINDS[-1] == "high_entropy"
    assert KINDS.index("anthropic_key") < KINDS.index("openai_key")


_KEY_CHARS = string.ascii_letters + string.digits
_filler = st.text(alphabet=string.ascii_letters + string.digits + " .,:;!?()\n", max_size=40)
_prefixes = st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-", "ghp_", "xoxb-", "AKIA"])


@given(
    before=_filler,
    after=_filler,
    prefix=_prefixes,
    body=st.text(alphabet=_KEY_CHARS, min_size=36, max_size=60),
)
@settings(max_examples=200, deadline=None)
def test_a_prefixed_key_never_survives_whatever_surrounds_it(before, after, prefix, body):
    if prefix == "AKIA":
        body = body.upper()[:16].ljust(16, "Q")
    secret = prefix + body
    out = Redactor().text(f"{before} {secret} {after}")
    assert secret not in out


@given(text=st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_redaction_is_idempotent_on_any_text(text):
    once = Redactor().text(text)
    assert Redactor().text(once) == once


def test_random_tokens_of_32_characters_or_more_are_redacted():
    rng = random.Random(5)
    tokens = ["".join(rng.choices(_KEY_CHARS, k=n)) for n in (32, 40, 64) for _ in range(200)]
    missed = [t for t in tokens if not looks_random(t)]
    assert len(missed) <= 2, missed  # measured: about 1 in 1000 random 32-character runs
