"""Redaction of what a harvested session holds: secrets out before anything is written.

Every text a harvest keeps (the task, each turn, tool arguments, tool outputs, paths) passes
through :class:`Redactor` before it reaches a file or the screen. A secret is replaced with
``[REDACTED:<kind>]`` and counted by kind, so the summary can say what was taken out. The
replacement itself matches no rule, so redacting twice changes nothing.

The rules, in the order they run (an earlier rule's replacement is never matched by a later one):

==================  ===========================================================================
kind                what it matches
==================  ===========================================================================
private_key         a PEM private key block, ``-----BEGIN ... PRIVATE KEY-----`` to its END line
                    (or to the end of the text when the END line was cut off)
anthropic_key       ``sk-ant-`` and 20+ key characters
openai_key          ``sk-`` (also ``sk-proj-``, ``sk-svcacct-``, ``sk-admin-``) and 20+ key characters
github_token        ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` and 30+ characters; ``github_pat_``
aws_access_key      ``AKIA``/``ASIA`` and 16 upper-case letters or digits
slack_token         ``xoxb-``/``xoxp-``/``xoxa-``/``xoxo-``/``xoxr-``/``xoxs-`` tokens
jwt                 three base64url parts, the first two starting ``eyJ`` (a JSON header)
url_credentials     the ``user:password`` of ``scheme://user:password@host``
bearer              the token after ``Bearer`` or ``Basic`` (an Authorization header's value)
secret_assignment   the value in ``password=...``, ``api_key: ...``, ``"client_secret": "..."``,
                    ``GITHUB_TOKEN=...``: a key naming a password, secret, token, credential or
                    API/access key, then ``=`` or ``:``, then the value (kept: the key, and
                    values that are references such as ``$VAR``, ``${VAR}`` or ``<placeholder>``)
high_entropy        a run of 20+ base64/base64url characters that looks random (below)
==================  ===========================================================================

**The high-entropy rule.** A candidate is a run of at least 20 characters from
``A-Z a-z 0-9 + / = _ -``. It is redacted when its Shannon entropy (bits per character, over
the run without ``=`` padding) reaches :data:`ENTROPY_BITS` (4.0; for runs shorter than 25
characters, ``log2(length) - 0.6``, since a short run cannot reach 4.0 bits however random
it is) and it holds both a letter and a digit. A run with ``/`` that looks like a path (it
starts with ``/``, ``~`` or ``.``, or has no upper-case letter) is judged part by part: a path
of ordinary names is kept, one random part redacts the whole run; any other run with ``/`` (a
base64 secret) is judged whole. About 7% of random 20-character runs fall under the threshold
(1 in 1000 from 32 characters on): the rule is a net under the specific ones, not a proof.
Kept on purpose:

- UUIDs (``8-4-4-4-12`` hex: session ids, request ids);
- hex strings of up to 64 characters (git commits, sha1/sha256 digests: a coding session is
  full of them; a hex *secret* is still caught by ``secret_assignment`` when it is assigned);
- identifiers made of short word-like parts joined by ``_`` or ``-`` (``test_sleep_v2_final``,
  ``release-2024-11-03``): each part letters only or digits only, at most 12 characters.

Usage::

    r = Redactor()
    r.text("key sk-...")   # 'key [REDACTED:openai_key]' (with 20+ key characters after sk-)
    r.counts                                    # {'openai_key': 1}
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["ENTROPY_BITS", "KINDS", "Redactor", "looks_random", "shannon_entropy"]

#: Bits per character from which a long run counts as random (see the module docstring).
ENTROPY_BITS = 4.0
_MIN_RUN = 20

_KEY_BODY = r"[A-Za-z0-9_\-]"
_NOT_KEY = r"(?<![A-Za-z0-9_\-])"

#: Each kind and its pattern; a pattern's group ``s`` (when it has one) is the part replaced,
#: else the whole match is.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r"(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|.*\Z)",
            re.S,
        ),
    ),
    ("anthropic_key", re.compile(_NOT_KEY + r"sk-ant-" + _KEY_BODY + r"{20,}")),
    ("openai_key", re.compile(_NOT_KEY + r"sk-(?:proj-|svcacct-|admin-)?" + _KEY_BODY + r"{20,}")),
    (
        "github_token",
        re.compile(r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"),
    ),
    ("aws_access_key", re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])")),
    ("slack_token", re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9\-]{10,}")),
    (
        "jwt",
        re.compile(r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ),
    ("url_credentials", re.compile(r"(?<=://)(?P<s>[^\s/:@\[\]]+:[^\s/@\[\]]+)(?=@)")),
    ("bearer", re.compile(r"(?i)\b(?:bearer|basic)\s+(?P<s>[A-Za-z0-9._~+/\-]{8,}=*)")),
    (
        "secret_assignment",
        re.compile(
            r"(?i)\b[A-Za-z0-9_.\-]{0,40}?"  # bounded: a long run of name characters stays linear
            r"(?:passw(?:or)?d|pwd|secret|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key"
            r"|auth[_\-]?token|access[_\-]?token|refresh[_\-]?token|token|credentials?)"
            r"(?![A-Za-z0-9])[\"']?\s*[:=]\s*[\"']?"
            r"(?P<s>(?![$<%{\[])[^\s\"'`,;(){}<>\[\]\\]{3,})"
        ),
    ),
)

#: The words one of ``secret_assignment``'s keys holds (its rule runs only where one is).
_KEY_WORD = re.compile(r"(?i)passw|pwd|secret|api[_\-]?key|access[_\-]?key|private[_\-]?key|token|credential")

#: Every kind a redaction is counted under, in rule order.
KINDS: tuple[str, ...] = (*(kind for kind, _ in _RULES), "high_entropy")

_RUN = re.compile(r"[A-Za-z0-9+/=_\-]{" + str(_MIN_RUN) + ",}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_WORDISH = re.compile(r"(?:[A-Za-z]{1,12}|[0-9]{1,12})")
#: Values of a ``key=value`` that name no secret (``password=None``, ``token: true``).
_PLAIN_VALUES = frozenset({"none", "null", "true", "false", "nil", "undefined", "redacted", "***"})


def shannon_entropy(text: str) -> float:
    """Bits per character of ``text``'s own character frequencies (0.0 for an empty text)."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def _random_part(part: str) -> bool:
    core = part.strip("=")
    if len(core) < _MIN_RUN:
        return False
    if _UUID.fullmatch(core) or (_HEX.fullmatch(core) and len(core) <= 64):
        return False
    if all(_WORDISH.fullmatch(p) for p in re.split(r"[_\-]+", core) if p):
        return False
    if not (re.search(r"[0-9]", core) and re.search(r"[A-Za-z]", core)):
        return False
    threshold = min(ENTROPY_BITS, math.log2(len(core)) - 0.6)
    return shannon_entropy(core) >= threshold


def looks_random(run: str) -> bool:
    """Whether a run of base64-ish characters is redacted by the high-entropy rule."""
    if "/" in run and (run[0] in "/~." or run.lower() == run):
        return any(_random_part(p) for p in run.split("/"))  # a path: each part on its own
    return _random_part(run)


class Redactor:
    """Redacts texts (and nested data) and counts what it took out, by kind.

    One redactor per harvest: :attr:`counts` adds up over every text it saw.
    """

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by ``[REDACTED:<kind>]``."""
        for kind, pattern in _RULES:
            if kind == "secret_assignment":
                if _KEY_WORD.search(value):  # the full rule only where a key word is: far cheaper
                    value = pattern.sub(self._assignment, value)
            else:
                value = pattern.sub(self._replacer(kind), value)
        return _RUN.sub(self._entropy, value)

    def data(self, value: Any) -> Any:
        """A copy of ``value`` (JSON-like: mappings, lists, strings, scalars) with every string
        redacted; mapping keys are kept as they are."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return {k: self.data(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        return value

    def _replacer(self, kind: str) -> Callable[[re.Match[str]], str]:
        def replace(m: re.Match[str]) -> str:
            self.counts[kind] += 1
            if "s" in m.re.groupindex:
                return (
                    m.string[m.start() : m.start("s")] + f"[REDACTED:{kind}]" + m.string[m.end("s") : m.end()]
                )
            return f"[REDACTED:{kind}]"

        return replace

    def _assignment(self, m: re.Match[str]) -> str:
        secret = m.group("s")
        if secret.lower() in _PLAIN_VALUES or secret.startswith("REDACTED"):
            return m.group(0)
        self.counts["secret_assignment"] += 1
        return m.string[m.start() : m.start("s")] + "[REDACTED:secret_assignment]"

    def _entropy(self, m: re.Match[str]) -> str:
        if not looks_random(m.group(0)):
            return m.group(0)
        self.counts["high_entropy"] += 1
        return "[REDACTED:high_entropy]"
