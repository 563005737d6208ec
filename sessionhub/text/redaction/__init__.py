"""Secret redaction for everything SessionHub stores.

Every string of every ingested event passes through :func:`redact_text`, so the common
case (a string holding no secret at all) has to be close to free. The engine is a
keyword-anchored rule set:

* Each rule owns a few short literal *anchors* that every one of its matches contains
  at a known offset (``ghp_`` at the start of a GitHub token, ``ken`` two characters into
  ``token``...).
* All anchors are compiled into one prefilter regex shaped as a trie whose branches
  start with literal characters. CPython's regex engine then skips every position whose
  character cannot start an anchor, and anchors were picked to start on characters that
  are rare in prose and code (``k``, ``y``, ``:``...) rather than ``e``/``t``/``a``/``s``.
  A string without anchors costs one such scan and nothing else.
* A rule is only ever tried where one of its anchors was found: its pattern is matched
  at that position, never scanned over the whole string. Long tool outputs thus cost a
  linear prefilter scan plus a constant per anchor hit.
* Exact token formats run first, then headers and command lines, then the generic
  ``key = value`` assignments. High-entropy values are redacted only in such contexts
  (the key names a secret), so git SHAs, UUIDs and digests elsewhere survive.

A secret becomes ``[REDACTED:<type>]``. Markers are never matched again and redaction is
repeated until nothing changes, so ``redact_text(redact_text(t)) == redact_text(t)``.

Pure Python and no Django: importable from workers, scripts and benchmarks alike.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from typing import TypeAlias

from .engine import (
    _GATE_LITERAL,
    _gate_search,
    _has_anchor,
    _plan,
    _redact_once,
)
from .rules import _BENIGN_TOKEN_QUALIFIERS, _KEY_QUALIFIERS, _RULES
from .values import (
    _CAMEL_BOUNDARY,
    _MARKER_PREFIX,
    _MAX_ROUNDS,
    RULES_VERSION,
    _marker,
    high_entropy_spans,
    is_identifier_shaped,
)

__all__ = [
    "RULES_VERSION",
    "contains_secret",
    "has_random_run",
    "keyed_form",
    "redact_identifier",
    "redact_key",
    "redact_shared",
    "redact_text",
    "redact_value",
    "set_identity_key",
    "unchanged",
]

# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


# Short strings that hold an anchor but no secret and come again and again, such as the
# channel "cli" of every Claude Code event (the anchor of the CLI password rule): each
# costs a full rule pass unless it is found here. Only strings that redaction left as
# they were are kept, so no secret stays in memory through it; one-off strings (ids that
# happen to hold "c_") only fill it up, and it starts again empty when full.
_CLEAN_MAX_LENGTH = 200
_CLEAN_MAX_ENTRIES = 4096
_anchored_clean: set[str] = set()


def redact_identifier(text: str) -> str:
    """``redact_text`` for an identifier, a JSON key or a path: long runs that read as
    random are taken for secrets as well.

    An identifier may hold a key body with no recognisable prefix or context (an AWS
    secret key as a folder name, a token as a session id). Elsewhere (code, prose, tool
    output, signatures) only the rules decide: random-looking data is everywhere there.
    """
    result = redact_text(text)
    return _redact_random_runs(result) if has_random_run(result) else result


_RANDOM_RUN_MIN = 32
_HIGH_ENTROPY = _marker("high_entropy")


def _redact_random_runs(text: str) -> str:
    spans = high_entropy_spans(text)
    if not spans:
        return text
    pieces: list[str] = []
    done = 0
    for start, end in spans:
        pieces.append(text[done:start])
        pieces.append(_HIGH_ENTROPY)
        done = end
    pieces.append(text[done:])
    return "".join(pieces)


# Identifiers repeat on every event of a session (its id, its working directory): the
# ones found clean are remembered, as ``_anchored_clean`` remembers short clean strings.
_no_random_run: set[str] = set()


def has_random_run(text: str) -> bool:
    """Whether :func:`redact_identifier` would take a random-looking run out of ``text``."""
    if len(text) < _RANDOM_RUN_MIN or text in _no_random_run:
        return False
    if is_identifier_shaped(text) and high_entropy_spans(text):
        return True
    if len(_no_random_run) >= _CLEAN_MAX_ENTRIES:
        _no_random_run.clear()
    _no_random_run.add(text)
    return False


def redact_text(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED:<type>]``."""
    if _gate_search(text) is None and _GATE_LITERAL not in text:  # _has_anchor, inlined
        return text
    short = len(text) <= _CLEAN_MAX_LENGTH
    if short and text in _anchored_clean:
        return text
    result = _redact_once(text)
    if result is text:
        if short:
            if len(_anchored_clean) >= _CLEAN_MAX_ENTRIES:
                _anchored_clean.clear()  # unique strings (ids) would fill it otherwise
            _anchored_clean.add(text)
        return text
    # A replacement can hand a rule that already ran a new context (a token removed from
    # inside a longer value, say); repeat until stable so a second call changes nothing.
    for _ in range(_MAX_ROUNDS - 1):
        again = _redact_once(result)
        if again == result:
            break
        result = again
    return result


# --- identifiers: keys that must keep working as keys -----------------------------------

# Set once at start-up (``MemoryConfig.ready`` passes the ``IDENTITY_KEY`` setting): the
# keyed hash has to be the same in every process, or one identity would split in two.
_identity_key: bytes | None = None
_KEYED_DIGEST = 20  # hex digits (80 bits): no two identifiers of a team will share one
KEYED_SEPARATOR = "~"


def set_identity_key(key: bytes) -> None:
    """The secret behind :func:`keyed_form`'s hashes."""
    global _identity_key
    if not key:
        raise ValueError("the identity key must not be empty")
    _identity_key = bytes(key)


def identity_digest(raw: str) -> str:
    """A keyed hash of ``raw``: equal for equal strings, and useless to anyone without the
    key for guessing what ``raw`` was (a plain hash of a short password would not be)."""
    if _identity_key is None:
        raise RuntimeError("memory.redaction.set_identity_key() was never called")
    data = raw.encode("utf-8", "surrogatepass")
    return hmac.new(_identity_key, data, hashlib.sha256).hexdigest()[:_KEYED_DIGEST]


def keyed_form(raw: str, shown: str | None = None, *, limit: int = 200) -> str:
    """How an identifier is stored and shown: ``raw`` itself when it holds no secret, else
    its redacted form followed by ``~`` and a keyed hash of ``raw``.

    Two identifiers that redaction would make alike (``first-token:[REDACTED:...]`` for
    two projects) stay two keys, and a retried delivery gives the same form again, while
    neither the database nor any answer ever holds the secret. ``shown`` is the redacted
    form when the caller derived it (from redacted parts) itself; ``limit`` the column's
    length, which the result never exceeds.
    """
    if shown is None:
        shown = redact_identifier(raw)
    if shown == raw:
        return raw
    suffix = KEYED_SEPARATOR + identity_digest(raw)
    return shown[: max(0, limit - len(suffix))] + suffix


# Object keys are few and repeat endlessly (as for ``_key_kinds``): the clean ones are
# remembered, so a payload's keys cost a set lookup each.
_clean_keys: set[str] = set()
_KEY_CACHE_MAX_LENGTH = 200


def redact_key(key: str) -> str:
    """A JSON object key as stored: unchanged unless it holds a secret, then keyed (two
    secret keys of one object must not become one)."""
    if key in _clean_keys:
        return key
    stored = keyed_form(key, limit=max(len(key), _KEY_CACHE_MAX_LENGTH))
    if stored is key and len(key) <= _KEY_CACHE_MAX_LENGTH:
        if len(_clean_keys) >= _CLEAN_MAX_ENTRIES:
            _clean_keys.clear()
        _clean_keys.add(key)
    return stored


def contains_secret(text: str) -> bool:
    """Tell cheaply whether ``redact_text`` would find anything to redact in ``text``."""
    if not _has_anchor(text):
        return False
    for index, spots in _plan(text).items():
        rule = _RULES[index]
        for position, anchor_start in spots:
            m = rule.find(text, position, anchor_start)
            if m is not None and rule.accepts(m):
                return True
    return False


# Dictionary keys whose string values are secrets as a whole, by their last word.
_SECRET_KEY_WORDS = {
    "password": "password",
    "passwd": "password",
    "passphrase": "password",
    "passcode": "password",
    "secret": "secret",
    "secrets": "secret",
    "token": "token",
    "apikey": "api_key",
    "accesskey": "access_key",
    "secretkey": "secret_key",
    "privatekey": "private_key",
    "authorization": "authorization",
    "auth": "authorization",
    "credential": "credentials",
    "credentials": "credentials",
    "cookie": "cookie",
}
_KEY_SEPARATORS = re.compile(r"[^a-z0-9]+")
_key_kinds: dict[str, str | None] = {}


def _secret_key_kind(key: str) -> str | None:
    """The redaction type for a dict key that names a secret, else None."""
    try:
        return _key_kinds[key]
    except KeyError:
        pass
    words = [w for w in _KEY_SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", key).lower()) if w]
    kind: str | None = None
    if words:
        last = words[-1]
        before = words[-2] if len(words) > 1 else ""
        if last == "token" and before in _BENIGN_TOKEN_QUALIFIERS:
            kind = None
        elif last in _SECRET_KEY_WORDS:
            kind = _SECRET_KEY_WORDS[last]
        elif last == "key" and before in _KEY_QUALIFIERS:
            kind = f"{before}_key"
        elif last in ("pass", "pwd") and before and before != "old":
            kind = "password"  # db_pass, DB_PWD; a bare "pwd" is a working directory
    if len(_key_kinds) < 4096:  # payload key names are few and repeat endlessly
        _key_kinds[key] = kind
    return kind


def _is_marker(value: str) -> bool:
    return value.startswith(_MARKER_PREFIX) and value.find("]") == len(value) - 1


# What redact_value builds: a JSON object or array (keys stay as given, strings or not).
_Container: TypeAlias = dict[object, object] | list[object]


def redact_value(value: object, memo: dict[str, str] | None = None, *, copy: bool = True) -> object:
    """Return a redacted deep copy of parsed JSON; values of secret-named keys go whole,
    and keys that hold a secret are stored in their keyed form (:func:`redact_key`).

    ``memo`` (text -> redact_text(text)), when given, is consulted and filled: values
    that share strings, such as an event's payload and the facts drawn from it, then
    redact each string once. Redaction is deterministic, so the result is the same.

    ``copy=False`` returns ``value`` itself when redacting it would change nothing (the
    usual case: no secret anywhere), found in one walk that builds nothing.
    """
    if isinstance(value, str):
        return redact_text(value) if memo is None else redact_shared(value, memo)
    if not isinstance(value, (dict, list, tuple)):
        return value
    if not copy:
        if memo is None:
            memo = {}  # the walk's results, for the copy if one is needed after all
        if unchanged(value, memo=memo):
            return value
    # An explicit stack instead of recursion: no payload depth can exhaust the C stack.
    root: _Container = {} if isinstance(value, dict) else []
    stack: list[tuple[_Container | tuple[object, ...], _Container]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        pairs = source.items() if isinstance(source, dict) else ((None, x) for x in source)
        for key, item in pairs:
            if isinstance(item, str):
                copied: object = _redacted_item(key, item, memo)
            elif isinstance(item, dict):
                copied = {}
                stack.append((item, copied))
            elif isinstance(item, (list, tuple)):
                copied = []
                stack.append((item, copied))
            else:
                copied = item
            if isinstance(target, dict):
                target[redact_key(key) if isinstance(key, str) else key] = copied
            else:
                target.append(copied)
    return root


def unchanged(
    *values: object,
    memo: dict[str, str] | None = None,
    longest: int = 0,
    clean: set[str] | None = None,
) -> bool:
    """Whether ``redact_value`` would give every one of ``values`` back as it is: no
    secret in any string, no key that holds or names one (with a value), no tuple.

    The usual answer is yes, and this finds it with one prefilter scan: the strings are
    joined with NULs, which no anchor holds, so the joined text has an anchor exactly
    where one of its strings has one. Only the strings around an anchor are then redacted
    one by one (short ones such as the channel ``cli`` are mostly in the clean cache).
    ``memo``, when given, receives the strings checked one by one, as ``redact_shared``
    would. ``longest``, when given, also asks that no string be longer: a caller that
    trims long strings then knows there is nothing to trim either. ``clean``, when given
    (one set for a request's events, which repeat their ids and paths), holds strings an
    earlier call found to need nothing: they are not scanned again, and it receives the
    short strings of a call that answers yes.
    """
    strings: list[str] = []
    stack: list[object] = list(values)
    while stack:
        source = stack.pop()
        kind_of = type(source)
        items: Iterable[object]
        if kind_of is str:
            strings.append(source)  # type: ignore[arg-type]
            continue
        if kind_of is dict:
            for key, item in source.items():  # type: ignore[attr-defined]
                plain = _plain_keys.get(key)
                if plain:
                    continue  # its value needs no more than the scan below
                if plain is None:
                    if type(key) is not str:
                        return False  # redact_value keeps it; not JSON, so look no closer
                    if key not in _clean_keys and redact_key(key) is not key:
                        return False
                    if _plain_key(key):
                        continue
                if item and type(item) is str:
                    if _secret_key_kind(key) and not _is_marker(item):
                        return False  # a secret-named key's value goes whole
                    long_identifier = len(item) >= _RANDOM_RUN_MIN and _is_identifier_key(key)
                    if long_identifier and has_random_run(item):
                        return False  # an id or a path holding a random-looking run
            items = source.values()  # type: ignore[attr-defined]
        elif kind_of is list:
            items = source  # type: ignore[assignment]
        elif kind_of is tuple:
            return False
        else:
            continue
        for item in items:
            item_type = type(item)
            if item_type is str:
                strings.append(item)  # type: ignore[arg-type]
            elif item_type is dict or item_type is list or item_type is tuple:
                stack.append(item)
    if not strings:
        return True
    length = max(map(len, strings))
    if longest and length > longest:
        return False
    if clean:
        strings = [text for text in strings if text not in clean]
    if not strings:
        return True
    if not _strings_unchanged(strings, memo):
        return False
    if clean is not None:
        if len(clean) >= _CLEAN_MAX_ENTRIES:
            clean.clear()
        clean.update(text for text in strings if len(text) <= _CLEAN_MAX_LENGTH)
    return True


def _strings_unchanged(strings: list[str], memo: dict[str, str] | None) -> bool:
    """Whether ``redact_text`` gives every one of ``strings`` back as it is (one scan of
    them joined, as ``unchanged`` describes)."""

    def same(text: str) -> bool:
        return (redact_text(text) if memo is None else redact_shared(text, memo)) == text

    joined = "\x00".join(strings)
    hit = _gate_search(joined)
    if hit is not None and joined.count("\x00") != len(strings) - 1:
        # A string holds a NUL itself: the joined text no longer shows where each one
        # starts, so each is looked at on its own.
        return all(same(text) for text in strings)
    while hit is not None:
        # The string around the anchor, found by the separators on either side.
        start = joined.rfind("\x00", 0, hit.start()) + 1
        end = joined.find("\x00", hit.start())
        if not same(joined[start:] if end < 0 else joined[start:end]):
            return False
        hit = None if end < 0 else _gate_search(joined, end + 1)
    return _GATE_LITERAL not in joined or all(
        same(text) for text in strings if _GATE_LITERAL in text
    )


# Keys found clean, each with whether it is plain: it names no secret and no identifier
# (``tool_name``, ``stdout``), so for ``unchanged`` its value is a string like any other.
# A key costs one lookup here.
_plain_keys: dict[str, bool] = {}


def _plain_key(key: str) -> bool:
    """Whether a clean ``key`` is plain, remembered in ``_plain_keys``."""
    plain = _secret_key_kind(key) is None and not _is_identifier_key(key)
    if len(key) <= _KEY_CACHE_MAX_LENGTH:
        if len(_plain_keys) >= _CLEAN_MAX_ENTRIES:
            _plain_keys.clear()
        _plain_keys[key] = plain
    return plain


# Keys whose values are identifiers or paths (cwd, session_id, sessionKey, workspaceDir):
# their values are redacted as identifiers (``redact_identifier``).
_IDENTIFIER_KEY_ENDINGS = ("id", "cwd", "path", "dir", "key", "workspace", "project")
_identifier_keys: dict[str, bool] = {}


def _is_identifier_key(key: str) -> bool:
    try:
        return _identifier_keys[key]
    except KeyError:
        pass
    found = key.lower().endswith(_IDENTIFIER_KEY_ENDINGS)
    if len(_identifier_keys) < 4096:
        _identifier_keys[key] = found
    return found


def _redacted_item(key: object, item: str, memo: dict[str, str] | None) -> str:
    """One string of a structure: whole when its key names a secret, else its text
    redacted (through ``memo`` when there is one), as an identifier under an identifier's
    key."""
    kind = _secret_key_kind(key) if item and isinstance(key, str) else None
    if kind is not None:
        return item if _is_marker(item) else _marker(kind)
    result = redact_text(item) if memo is None else redact_shared(item, memo)
    identifier = isinstance(key, str) and _is_identifier_key(key)
    return _redact_random_runs(result) if identifier and has_random_run(result) else result


def redact_shared(text: str, memo: dict[str, str]) -> str:
    """``redact_text`` through a memo shared with other calls (see ``redact_value``)."""
    result = memo.get(text)
    if result is None:
        result = memo[text] = redact_text(text)
    return result
