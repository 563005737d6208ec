"""Markers, the rules version, and what a value must look like to be taken for a secret."""

from __future__ import annotations

import re

# Stored rows record the version they were redacted with; bump on any rule change so
# the background job knows which rows to redact again.
RULES_VERSION = 2

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
# An unquoted identifier value containing one of these is a variable, not a literal.
_NAME_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred")


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
    if _MASKED.fullmatch(value):
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


def _value(m: re.Match) -> tuple[str, bool]:
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
