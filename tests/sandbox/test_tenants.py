"""Token files with one tenant per line, and who a presented token is."""

from __future__ import annotations

import pytest

from sandbox.service.tenants import TenantTokens, parse_token_file
from skillopt.errors import ConfigError


def test_a_token_file_holds_one_tenant_per_line_with_an_optional_cap():
    text = "# fleet tokens\n\nalpha-token-0001 max_sessions=3\n  beta-token-0002  \n"
    assert parse_token_file(text) == [("alpha-token-0001", 3), ("beta-token-0002", 0)]
    assert parse_token_file("single-token\n") == [("single-token", 0)]  # what a token file always was


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no token"),
        ("# only a comment\n", "holds no token"),
        ("tok-a max_sessions=x\n", "line 1: unknown option"),
        ("tok-a\ntok-b cap=3\n", "line 2: unknown option 'cap=3'"),
        ("tok-a\ntok-a\n", "line 2: the same token appears twice"),
    ],
)
def test_bad_token_files_name_the_line(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_token_file(text, source="token file t")


def test_a_presented_token_is_its_tenant_and_nobody_elses():
    tokens = TenantTokens([("alpha-token-0001", 3), ("beta-token-0002", 0)])
    alpha, beta = tokens.identify("alpha-token-0001"), tokens.identify(" beta-token-0002 ")
    assert alpha is not None and beta is not None and alpha != beta
    assert alpha.max_sessions == 3 and "alpha" not in alpha.id  # known by a hash, never the token
    assert tokens.identify("alpha-token-000") is None and tokens.identify("") is None
    assert not TenantTokens([])
