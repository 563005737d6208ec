"""A derived event id is its own keyed form (``adapters.base.derived_key``): no anchor of
the redaction rules can occur in ``sha256:`` followed by lowercase hex, and no random
run is taken out of a string without uppercase letters."""

from __future__ import annotations

import random
import string

from lifecycle.adapters.base import as_key, derive_event_id, derived_key
from sessionhub.text.redaction import redact_identifier
from sessionhub.text.redaction.engine import _GATE_LITERAL
from sessionhub.text.redaction.rules import _RULES

PREFIX = "sha256:"
HEX = set(string.hexdigits.lower())


def _may_occur(anchor: str) -> bool:
    """Whether ``anchor`` can be part of ``PREFIX`` followed by lowercase hex digits."""
    for start in range(len(PREFIX) + 1):
        head = PREFIX[start:]
        if head.startswith(anchor):
            return True  # within the prefix
        if anchor.startswith(head) and set(anchor[len(head) :]) <= HEX:
            return True  # the prefix's end, then hex
    return False


def test_no_anchor_can_occur_in_a_derived_id() -> None:
    spellings = {_GATE_LITERAL}
    for rule in _RULES:
        for anchor, _lead in rule.anchors:
            # An uncased anchor matches in any case; the derived id is all lowercase.
            spellings.add(anchor if rule.cased else anchor.lower())
    assert len(spellings) > 20
    assert [s for s in spellings if _may_occur(s)] == []
    # The check itself finds anchors that could occur.
    assert _may_occur("a25") and _may_occur("6:f") and _may_occur("bee") and not _may_occur("g")


def test_a_derived_id_is_its_keyed_form() -> None:
    rng = random.Random(38)
    for n in range(3000):
        body = {"n": n, "text": "".join(rng.choices(string.printable, k=rng.randrange(40)))}
        derived = derive_event_id("claude_code", body)
        assert derived_key("claude_code", body) == derived
        assert as_key(derived) == derived
        assert redact_identifier(derived) == derived
    for digest in ("0" * 40, "f" * 40, "deadbeef" * 5, "c0ffee" * 7):
        text = PREFIX + digest[:40]
        assert as_key(text) == text
