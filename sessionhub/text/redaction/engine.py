"""The prefilter (every rule's anchors in one trie-shaped regex) and one redaction round."""

from __future__ import annotations

import re
from typing import TypeAlias

from .rules import _RULES, _Rule
from .values import _marker

# ---------------------------------------------------------------------------------------
# Prefilter
# ---------------------------------------------------------------------------------------


def _spellings(anchor: str, cased: bool) -> list[tuple[str, ...]]:
    """Regex atoms for an anchor, one spelling per case of its first letter.

    The first atom stays a plain literal so that every branch of the compiled trie starts
    with one, which is what lets the engine skip non-candidate positions in C.
    """
    rest = tuple(
        f"[{ch.upper()}{ch.lower()}]" if not cased and ch.isalpha() else re.escape(ch)
        for ch in anchor[1:]
    )
    first = anchor[0]
    if cased or not first.isalpha():
        return [(re.escape(first), *rest)]
    return [(first.upper(), *rest), (first.lower(), *rest)]


# A trie of regex atoms: each atom leads to the atoms that may follow it; "" ends a spelling.
_Trie: TypeAlias = dict[str, "_Trie"]


def _trie_regex(spellings: list[tuple[str, ...]]) -> str:
    trie: _Trie = {}
    for atoms in spellings:
        node = trie
        for atom in atoms:
            node = node.setdefault(atom, {})
        node[""] = {}

    def emit(node: _Trie) -> str:
        branches = [atom + emit(child) for atom, child in sorted(node.items()) if atom]
        if not branches:
            return ""
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    return emit(trie)


# The anchor that the yes/no gate (is there any anchor at all?) looks for with str's own
# substring search instead of the trie. "x" starts no other anchor, and as a trie
# candidate every "x" of a string costs a failed match attempt: a run of x's (masked
# values, padding) costs ~40 ns a character there, while ``in`` skips it in C.
_GATE_LITERAL = "xox"


def _build_prefilter() -> tuple[
    re.Pattern[str], re.Pattern[str], dict[str, tuple[tuple[int, int], ...]]
]:
    owners: dict[str, list[tuple[int, int]]] = {}
    spellings: set[tuple[str, ...]] = set()
    for index, rule in enumerate(_RULES):
        for anchor, lead in rule.anchors:
            owners.setdefault(anchor.lower(), []).append((index, lead))
            spellings.update(_spellings(anchor, rule.cased))
    # An anchor that began another would shadow it in finditer(); keep them apart.
    for a in owners:
        for b in owners:
            if a != b and b.startswith(a):
                raise ValueError(f"anchor {a!r} is a prefix of anchor {b!r}")
    pattern = re.compile(_trie_regex(sorted(spellings)))
    # The gate answers as the trie does only if the literal is one of its spellings.
    separate = tuple(re.escape(ch) for ch in _GATE_LITERAL)
    if separate not in spellings:
        raise ValueError(f"{_GATE_LITERAL!r} is no longer an anchor spelled as written")
    gate = re.compile(_trie_regex(sorted(spellings - {separate})))
    uses = {anchor: tuple(sorted(found)) for anchor, found in owners.items()}
    return pattern, gate, uses


_PREFILTER, _GATE, _ANCHOR_USES = _build_prefilter()
_prefilter_finditer = _PREFILTER.finditer
_gate_search = _GATE.search


def _has_anchor(text: str) -> bool:
    """Whether the prefilter finds any anchor in ``text``: the same answer as
    ``_PREFILTER.search``, sooner."""
    return _gate_search(text) is not None or _GATE_LITERAL in text


def _plan(text: str) -> dict[int, list[tuple[int, int]]]:
    """Rule index -> [(match position, anchor position)], in text order."""
    plan: dict[int, list[tuple[int, int]]] = {}
    for hit in _prefilter_finditer(text):
        start = hit.start()
        for index, lead in _ANCHOR_USES[hit.group().lower()]:
            if start >= lead:
                plan.setdefault(index, []).append((start - lead, start))
    return plan


def _apply_rule(rule: _Rule, text: str, spots: list[tuple[int, int]]) -> str:
    pieces: list[str] = []
    done = 0  # end of the last replaced match; later matches must start after it
    for position, anchor_start in spots:
        if position < done:
            continue
        m = rule.find(text, position, anchor_start)
        if m is None or m.start() < done or not rule.accepts(m):
            continue
        start, end = rule.secret_span(m)
        pieces.append(text[done:start])
        pieces.append(_marker(rule.kind_of(m) if rule.kind_of else rule.kind))
        done = end
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


def _redact_once(text: str) -> str:
    plan = _plan(text)
    index = -1
    while True:
        pending = [i for i in plan if i > index]
        if not pending:
            return text
        index = min(pending)
        result = _apply_rule(_RULES[index], text, plan[index])
        if result is not text:
            # Positions moved: find the anchors again for the rules still to run.
            text = result
            plan = _plan(text)
