"""Long strings skip the gate's scan when they hold none of its first characters: the
answers of ``redact_text``, ``contains_secret`` and ``unchanged`` stay those of the scan.

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
from sessionhub.text.redaction.rules import _RULES

SECRETS_JSONL = Path(__file__).resolve().parents[1] / "fixtures" / "secrets.jsonl"
LONG = engine.LONG_TEXT


def _anchor_spellings() -> list[str]:
    """Every anchor of the gate as it may appear (both cases of an uncased first letter;
    the rest of the anchor as written)."""
    found = []
    for rule in _RULES:
        for anchor, _lead in rule.anchors:
            if anchor == engine._GATE_LITERAL:
                continue
            firsts = {anchor[0]} if rule.cased else {anchor[0].lower(), anchor[0].upper()}
            found += [first + anchor[1:] for first in firsts]
    return found


def test_the_gate_starts_are_the_first_characters_of_its_anchors() -> None:
    spellings = _anchor_spellings()
    assert {s[0] for s in spellings} == set(engine._GATE_STARTS)
    for spelling in spellings:
        assert engine._GATE.match(spelling), spelling


def test_no_gate_match_starts_at_another_character() -> None:
    others = [chr(c) for c in range(0x300) if chr(c) not in engine._GATE_STARTS]
    tails = [s[1:] for s in _anchor_spellings()]
    for other in others:
        for tail in tails:
            assert engine._GATE.match(other + tail) is None, (other, tail)
    text = "".join(others) * 3
    assert engine._no_gate_start(text)
    assert engine._GATE.search(text) is None
    assert not engine._no_gate_start(text + engine._GATE_STARTS[-1])


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
    # "xoxb-" and digits hold none of the gate's first characters: only the literal says so.
    token = "xoxb-3043226137-5521821463194-2vK7cOWecwXWwxig6PNTD7CP"
    assert not engine._no_gate_start(token)  # its tail has some; its head does not
    head = "xoxb-304322613755218214631940000"
    long = "x" * LONG + head + "x" * 10
    assert engine._no_gate_start(long)
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
