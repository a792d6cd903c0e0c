"""Spreadsheet helpers: parse_amount(text) reads an amount exported as European text ('1.234,56 €', '(87,10 €)')."""

import sys


def parse_amount(text):
    """The number an exported amount stands for.

    European format: '.' groups thousands, ',' is the decimal comma; a currency sign and spaces
    may surround it; a refund is written with a minus sign or in parentheses. Numbers pass as
    they are; an empty cell is None.
    """
    if text is None or isinstance(text, (int, float)):
        return text
    s = str(text).strip()
    if not s:
        return None
    negative = s.startswith("-") or (s.startswith("(") and s.endswith(")"))
    s = s.strip("()").replace("€", "").replace("EUR", "").replace(" ", "").replace("\u00a0", "").lstrip("-")
    value = float(s.replace(".", "").replace(",", "."))
    return -value if negative else value


def _self_test():
    cases = {
        "1.234,56 €": 1234.56,
        "(87,10 €)": -87.1,
        "-310,25 €": -310.25,
        "0,99": 0.99,
        "12.000 €": 12000.0,
    }
    for text, want in cases.items():
        got = parse_amount(text)
        assert abs(got - want) < 1e-9, (text, got, want)
    assert parse_amount(None) is None and parse_amount(5) == 5
    print("self-test ok")


if __name__ == "__main__" and "--self-test" in sys.argv:
    _self_test()
