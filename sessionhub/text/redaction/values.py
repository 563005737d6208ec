"""Markers, the rules version, and what a value must look like to be taken for a secret."""

from __future__ import annotations

import re

# Stored rows record the version they were redacted with; bump on any rule change so
# the background job knows which rows to redact again.
RULES_VERSION = 3

_MARKER_PREFIX = "[REDACTED:"
# One round almost always suffices; another happens only when a replacement changes
# what a rule that already ran would see. The cap only guards against a rule bug.
_MAX_ROUNDS = 4


def _marker(kind: str) -> str:
    return f"{_MARKER_PREFIX}{kind}]"


# ---------------------------------------------------------------------------------------
# Value heuristics shared by the context rules
# ---------------------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL_WORDS = re.compile(r"[a-z]*(?:[A-Z][a-z]{2,})+")
_DOTTED_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
# $DB_PASSWORD, ${TOKEN}, $(cat f) and SQL's $1; :password / @password are checked apart
_PARAMETER = re.compile(r"\$(?:\{|\(|[A-Za-z_][A-Za-z0-9_]*$|[0-9]+$)")
_NAMED_PARAMETER = re.compile(r"[:@][A-Za-z_][A-Za-z0-9_]*")
_MASKED = re.compile(r"([*xX.#-])\1{2,}|•+")
# What follows "password:" or "token =" in type annotations, schemas and configs when no
# secret is present.
_NON_VALUES = frozenset(
    "none null nil true false undefined string str bytes text int bool boolean number "
    "object any optional required redacted hidden masked env placeholder".split()
)
# A SQL named parameter (:password, @token) holding one of these names the field.
_NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred")
# CHANGEME, YOUR_API_KEY, REPLACE_ME: capitals and underscores, no digit, stand for a value.
_YOUR_PLACEHOLDER = re.compile(r"(?i)your[-_]")
_CAPS_PLACEHOLDER = re.compile(r"[A-Z]{2,}(?:_[A-Z]+)*")


def _is_placeholder(value: str) -> bool:
    """True for values that stand in for a secret rather than being one."""
    if not value or _MARKER_PREFIX in value:
        return True
    if not any(c.isalnum() for c in value):
        return True  # "**", "...", "?": punctuation is never the secret itself
    first = value[0]
    if first == "$" and _PARAMETER.match(value):
        return True
    if first in ":@" and _NAMED_PARAMETER.fullmatch(value):
        # SQL named parameters (:password, @token) name the field; "@dmin1" does not.
        return any(word in value.lower() for word in _NAME_WORDS)
    if first == "%" and (value.startswith("%(") or value in ("%s", "%d")):
        return True
    if first in "{<" or value.startswith("#{"):
        return True  # {{ vault_password }}, <your-token>, #{secret}
    if first == "@" and ("/" in value or "." in value):
        return True  # password=@password.txt: read from a file
    if _YOUR_PLACEHOLDER.match(value):
        return True  # your-api-key-here, your_token
    if _MASKED.fullmatch(value):
        return True
    if _CAPS_PLACEHOLDER.fullmatch(value) and ("_" in value or len(value) <= 12):
        return True
    return value.lower() in _NON_VALUES


def _looks_minted(value: str) -> bool:
    """Shape test for machine-made credentials, used where the key name is vague."""
    if len(value) < 8 or any(c.isspace() for c in value):
        return False
    if not any(c.isalpha() for c in value):
        return False  # numbers, OIDs, dates
    if any(c.isdigit() for c in value):
        return True
    if any(not c.isalnum() and c not in "-_./" for c in value):
        return True
    if _CAMEL_WORDS.fullmatch(value):
        return False  # LastEvaluatedTableName: a name, however long
    return len(value) >= 16 and any(c.isupper() for c in value) and any(c.islower() for c in value)


def _mixed_alnum(value: str) -> bool:
    """Random base62 strings virtually always mix digits with both letter cases."""
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


# Values after an assignment operator: double quoted, JSON-escaped double quoted (JSON
# embedded in a string, once or more), single quoted, or bare up to a delimiter.
_VALUE = (
    r"""(?:"(?P<v1>(?:[^"\\\n]|\\[^\n]){1,512})\""""
    r"""|\\+"(?P<v2>(?:[^"\\\n]|\\+[^"\\\n]){1,512}?)\\+\""""
    r"""|'(?P<v3>[^'\n]{1,512})'"""
    r"""|(?P<v4>[^\s"'`,;&|<>(){}\[\]\\]{1,512}))"""
)
_VALUE_GROUPS = ("v1", "v2", "v3", "v4")


def _value(m: re.Match[str]) -> tuple[str, bool]:
    """The captured value and whether it was quoted."""
    found = m.groupdict()
    for name in _VALUE_GROUPS:
        value = found.get(name)
        if value is not None:
            return value, name != "v4"
    return "", False


def _is_password_key(key: str) -> bool:
    key = key.lower()
    return "pass" in key or "pwd" in key


_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


# ---------------------------------------------------------------------------------------
# High-entropy runs in identifiers
# ---------------------------------------------------------------------------------------

# A run of base64 / base64url characters long enough to be a key body on its own.
_ENTROPY_RUN = re.compile(r"[A-Za-z0-9+/=_-]{32,}")
_HEX_RUN = re.compile(r"[0-9a-fA-F-]+")
# Pieces of a run that read as words: "Project", "settings" (with a vowel: "Fzcm" is not).
_WORDISH = re.compile(r"[A-Z]?[a-z]{3,}")
_VOWELS = frozenset("aeiouy")
# Random base62 of 32 characters or more has such words covering about a tenth of it
# (under 0.55 in 99.9 % of draws); CamelCase names and word-y paths have two thirds or more.
_WORDISH_SHARE = 0.55


def _word_share(run: str) -> float:
    covered = sum(
        m.end() - m.start() for m in _WORDISH.finditer(run) if _VOWELS & set(m.group().lower())
    )
    return covered / len(run)


def _is_random_run(run: str) -> bool:
    """Whether a long run of key characters reads as drawn at random: every character
    class present, not a hex digest or UUID, and few pieces that read as words."""
    if _HEX_RUN.fullmatch(run) or not _mixed_alnum(run):
        return False
    if sum(c.isalpha() for c in run) < 0.5 * len(run):
        return False  # mostly digits and dashes: dates, times, counters, UUID-like ids
    return _word_share(run) < _WORDISH_SHARE


def _is_plain_segment(segment: str) -> bool:
    """A path segment that is a name, not part of a key: short, one letter case, or
    mostly words."""
    if len(segment) < 4 or segment.islower() or segment.isdigit():
        return True
    return _word_share(segment) >= _WORDISH_SHARE


def high_entropy_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every run of 32+ key characters in ``text`` that reads as random
    (a key body, a base64 secret); git SHAs, UUIDs and word-y names are left out.

    "/" belongs to base64, so a run may be a whole path: the plain folders at either end
    ("/home/alice/src/...") are left out of it before it is judged."""
    spans = []
    for m in _ENTROPY_RUN.finditer(text):
        start, end = m.span()
        if "/" in m.group():
            segments = m.group().split("/")
            while segments and _is_plain_segment(segments[0]):
                start += len(segments.pop(0)) + 1
            while segments and _is_plain_segment(segments[-1]):
                end -= len(segments.pop()) + 1
            if end - start < 32:
                continue
        if _is_random_run(text[start:end]):
            spans.append((start, end))
    return spans


def is_identifier_shaped(text: str) -> bool:
    """Strings where a bare high-entropy run is taken for a secret: identifiers, keys and
    paths (no line breaks; no spaces unless a path), of a size identifiers have."""
    if not 32 <= len(text) <= 1000 or "\n" in text:
        return False
    if text.islower() or text.isupper():
        return False  # a random run mixes both cases: most paths and ids end here, in C
    return " " not in text or text[0] in "/~"
