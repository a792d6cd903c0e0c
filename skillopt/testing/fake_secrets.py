"""Secret-shaped strings for the redaction tests and corpora, joined from parts when the code
runs, so that no whole key pattern stands in the source: a secret scanner flags one whatever it
is, and these are made up, never real keys."""

from __future__ import annotations

__all__ = ["fake"]


def fake(*parts: str) -> str:
    """``parts`` joined: write the prefix (``"gh" "p_"``-like) apart from the rest."""
    return "".join(parts)
