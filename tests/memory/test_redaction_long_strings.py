"""Long strings (tool output padded around a line of the corpus) and a request's clean
strings: ``unchanged`` gives the answer ``redact_value`` gives, and ``redact_text`` the
answer ``contains_secret`` gives.

No Django and no database are needed.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionhub.text.redaction import contains_secret, engine, redact_text, redact_value, unchanged

SECRETS_JSONL = Path(__file__).resolve().parents[1] / "fixtures" / "secrets.jsonl"
LONG = 512


def _padded(text: str, pad: str) -> str:
    return pad * (LONG // len(pad) + 1) + text + pad * 3


PADS = ["x", "0123456789", " ", "=", "*", "-\n"]


def _corpus() -> list[str]:
    lines = SECRETS_JSONL.read_text().splitlines()
    return [json.loads(line)["text"] for line in lines if line.strip()]


@pytest.mark.parametrize("pad", PADS)
def test_long_strings_are_judged_as_the_scan_judges_them(pad: str) -> None:
    texts = [*_corpus(), "xoxb-3043226137-5521821463194-2vK7cOWecwXWwxig6PNTD7CP", "", "a"]
    for text in texts:
        long = _padded(text, pad)
        redacted = redact_text(long)
        # What the scan alone would give: the prefilter's answer and one redaction round.
        scanned = engine._gate_search(long) is not None or engine._GATE_LITERAL in long
        assert engine._has_anchor(long) == scanned
        assert (redacted != long) == contains_secret(long)
        assert unchanged(long) == (redacted == long)
        assert unchanged({"stdout": long, "cwd": "/srv"}) == (
            redact_value({"stdout": long, "cwd": "/srv"}) == {"stdout": long, "cwd": "/srv"}
        )


def test_a_slack_token_in_a_run_of_x_is_redacted() -> None:
    token = "xoxb-3043226137-5521821463194-2vK7cOWecwXWwxig6PNTD7CP"
    head = "xoxb-304322613755218214631940000"
    long = "x" * LONG + head + "x" * 10
    assert engine._has_anchor(long)
    assert unchanged({"stdout": long}) is False or redact_text(long) == long
    assert redact_text(_padded(token, "x")) != _padded(token, "x")
    assert not unchanged({"stdout": _padded(token, "x")})


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=string.printable + "éü€\x00", max_size=60),
    st.sampled_from(PADS),
    st.integers(min_value=0, max_value=3),
)
def test_unchanged_agrees_with_redact_value_on_long_strings(
    middle: str, pad: str, copies: int
) -> None:
    long = _padded(middle * (copies + 1), pad)
    value = {"tool_response": {"stdout": long, "stderr": middle}, "tool_name": "Bash"}
    assert unchanged(value) == (redact_value(value) == value)
    assert engine._has_anchor(long) == (
        engine._gate_search(long) is not None or engine._GATE_LITERAL in long
    )


def test_a_requests_clean_strings_give_the_same_answers() -> None:
    clean: set[str] = set()
    texts = _corpus()
    for text in [*texts, *texts]:  # twice: the second time, what was clean is known
        value = {"cwd": "/srv/app", "tool_response": {"stdout": text}, "tool_name": "Bash"}
        expected = redact_value(value) == value
        assert unchanged(value, clean=clean) == expected
        if not expected:
            assert text not in clean
    assert "/srv/app" in clean and "Bash" in clean
    assert all(redact_text(text) == text for text in clean)
