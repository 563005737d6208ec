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
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = [
    "RULES_VERSION",
    "contains_secret",
    "keyed_form",
    "redact_key",
    "redact_shared",
    "redact_text",
    "redact_value",
    "set_identity_key",
]

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


# ---------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    kind: str
    # (anchor, lead): the rule's pattern is matched `lead` characters before each place
    # where the prefilter found `anchor`.
    anchors: tuple[tuple[str, int], ...]
    pattern: re.Pattern
    cased: bool = True  # whether the anchors are case-sensitive
    groups: tuple[str, ...] = ()  # group(s) holding the secret; empty: the whole match
    check: Callable[[re.Match], bool] | None = None
    kind_of: Callable[[re.Match], str] | None = None  # type chosen per match
    scan: int = 0  # > 0: search this far past the anchor instead of matching at it

    def secret_span(self, m: re.Match) -> tuple[int, int]:
        found = m.groupdict()
        for name in self.groups:
            if found.get(name) is not None:
                return m.span(name)
        return m.span()

    def accepts(self, m: re.Match) -> bool:
        start, end = self.secret_span(m)
        if _MARKER_PREFIX in m.string[start:end]:
            return False  # never redact a marker again
        return self.check is None or self.check(m)

    def find(self, text: str, position: int, anchor_start: int) -> re.Match | None:
        if not self.scan:
            return self.pattern.match(text, position)
        end = min(len(text), anchor_start + self.scan)
        m = self.pattern.search(text, position, end)
        if m is not None and m.end() == end < len(text):
            # The window may have cut the match short; redo it on the whole string.
            m = self.pattern.match(text, m.start())
        return m


_URLSAFE = r"A-Za-z0-9_\-"
_TAIL = r"(?![A-Za-z0-9_\-])"


def _token(pattern: str) -> re.Pattern:
    return re.compile(pattern)


# -- generic `key = value` assignments -------------------------------------------------

# Matched at the secret word itself; what precedes it (GH_, db_, client_) is free, except
# where a check below says otherwise.
_ASSIGNMENT = re.compile(
    r"(?P<key>"
    r"[Pp][Aa][Ss][Ss](?:[Ww][Oo][Rr][Dd]|[Ww][Dd]|[Pp][Hh][Rr][Aa][Ss][Ee])?"
    r"|[Pp][Ww][Dd]"
    r"|[Ss][Ee][Cc][Rr][Ee][Tt](?:[_-]?(?:[Aa][Cc][Cc][Ee][Ss][Ss][_-]?)?[Kk][Ee][Yy])?"
    r"|[Tt][Oo][Kk][Ee][Nn]"
    r"|[Aa][Uu][Tt][Hh]"
    r"|[Cc][Rr][Ee][Dd][Ee][Nn][Tt][Ii][Aa][Ll][Ss]?"
    r"|[Kk][Ee][Yy]"
    r")(?![A-Za-z0-9_-])"
    # the closing quote of a JSON/dict key, then an operator on the same line
    r"""(?:\\*["'])?[ \t]{0,8}(?P<op>:=|=>|==|=|:)(?![=:])[ \t]{0,8}""" + _VALUE
)
# "key" alone is everywhere in code; only these qualifiers make it a secret's name.
_KEY_QUALIFIERS = frozenset(
    "api access secret private signing encryption master account auth client "
    "license subscription".split()
)
_WORD_BEFORE = re.compile(r"([A-Za-z]+)[_-]?$")


def _name_start(text: str, index: int) -> int:
    """Start of the identifier that ends at ``index`` (looking back 64 characters at most)."""
    start = index
    limit = max(0, index - 64)
    while start > limit and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    return start


def _qualifier_before(text: str, index: int) -> str:
    """The word just before a key word: "api" in API_KEY, "Request" in ClientRequestToken."""
    m = _WORD_BEFORE.search(text, max(0, index - 24), index)
    if m is None:
        return ""
    return _CAMEL_BOUNDARY.sub(" ", m.group(1)).rsplit(" ", 1)[-1].lower()


# Tokens that page, order or deduplicate requests (NextToken, ClientRequestToken,
# pad_token...) rather than authenticate anyone.
_BENIGN_TOKEN_QUALIFIERS = frozenset(
    "next page continuation pagination client request change idempotency sync input output "
    "start end resume cancellation cancel max min num total count eos bos pad unk sep cls "
    "mask special stop".split()
)


def _key_is_secret_name(m: re.Match) -> bool:
    key = m.group("key").lower()
    start = m.start("key")
    before = m.string[start - 1 : start]
    name_start = _name_start(m.string, start)
    if m.string[name_start - 2 : name_start] == "::":
        return False  # a namespaced type name: "AWS::IAM::AccessKey": "62d91b17..."
    if key in ("pass", "auth"):
        return not before.isalpha()  # DB_PASS, auth=...; not bypass, oauth
    if key == "pwd":
        return before in ("_", "-", ";")  # DB_PWD, ;PWD= in ODBC; not $PWD
    if key == "key":
        # apiKey / API_KEY / x-api-key / signing_key; not sessionKey or key=
        return _qualifier_before(m.string, start) in _KEY_QUALIFIERS
    if key == "token":
        return _qualifier_before(m.string, start) not in _BENIGN_TOKEN_QUALIFIERS
    return True


_HEX_LITERAL = re.compile(r"0[xX][0-9a-fA-F]+")
_ANNOTATED_DEFAULT = re.compile(r"[A-Za-z_][\w.\[\]]*=")
_TEMPLATE = re.compile(r"%\(\w+\)[sd]|\{[^{}\s]*\}|\$\{")
_WORDS = re.compile(r"[A-Za-z]+")
_SELF_NAMES = frozenset(
    "pass passwd password passphrase pwd secret secrets token key apikey auth credentials".split()
)


def _names_itself(value: str) -> bool:
    """Constants that spell a field's name: PASSWORD = "password", "waitForTaskToken"."""
    if len(value) > 64 or not _WORDS.fullmatch(value.replace("-", "").replace("_", "")):
        return False
    words = re.split(r"[-_]", _CAMEL_BOUNDARY.sub("_", value))
    return any(word.lower() in _SELF_NAMES for word in words)


def _is_code_value(m: re.Match, value: str) -> bool:
    """Whether a bare value is an expression of the surrounding code, not a literal."""
    text = m.string
    nxt = text[m.end() : m.end() + 1]
    if nxt in ("(", "[") or (nxt in ('"', "'") and len(value) <= 2):
        return True  # a call, a subscript, or a string prefix (f"...", rb'...')
    # Unary operators and optional chaining are code: +count, !done, opts?.token
    core = value.lstrip("+-!~").rstrip(":.").replace("?.", ".")
    if _DOTTED_NAME.fullmatch(core):
        return True  # an attribute: password = settings.DB_PASSWORD; token == self.eof:
    if (core.isdigit() and len(core) < 4) or _HEX_LITERAL.fullmatch(core):
        return True  # PASS = 20, 'HAVE_STRUCT_PASSWD': 1, STENCIL_PASS: 0x0B96
    op_start, op_end = m.span("op")
    if text[op_start] == ":":
        if text[op_end : op_end + 1] not in (" ", "\t") and (
            text[m.start() - 1 : m.start()] == ":" or value.isalpha()
        ):
            return True  # arn:aws:secretsmanager:...:secret:name, "passwd:gecos"
        if nxt == ";" and _IDENTIFIER.fullmatch(core):
            return True  # a typed field: privateKey: KeyObject;
        if _ANNOTATED_DEFAULT.match(value):
            return True  # a typed parameter: token:Token=None
    if not _IDENTIFIER.fullmatch(core):
        return False
    if core != value:
        return True  # "if token == expected:", "x = !token"
    if _is_attribute(text, m.start()):
        return True  # self._master_password = value
    lowered = value.lower()
    if "_" in value or any(word in lowered for word in _NAME_WORDS):
        return True  # a variable: password = user_password, token=token
    if nxt in (",", ")"):
        return True  # a keyword argument passing a variable along
    around = text[op_start - 1 : op_start] + text[op_end : op_end + 1]
    spaced = " " in around or "\t" in around
    # test_pass = await check(user); passwd = acct = ''; Password: must be set
    return spaced and _continues_line(text, m.end())


def _is_attribute(text: str, index: int) -> bool:
    """Whether the identifier around ``index`` is reached through a dot (obj.attr)."""
    start = _name_start(text, index)
    return text[start - 1 : start] == "."


def _continues_line(text: str, index: int) -> bool:
    """Whether more than a comment follows on the line after ``index``."""
    end = text.find("\n", index, index + 200)
    rest = text[index : end if end != -1 else index + 200].strip()
    return bool(rest) and not rest.startswith(("#", "//", ";"))


# What follows "name:" glued to it when the whole is a label and a place, not a key and
# its value: "/home/alice/src/api-v2", "~/src/x", "github.com/acme/web3-app".
_GLUED_PATH = re.compile(r"[/~]|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/")


def _is_label_and_path(m: re.Match, value: str) -> bool:
    """``first-token:/home/alice/src/api-v2``: a hyphenated label that happens to end in a
    secret's word, glued by a colon to a path or a host/path (SessionHub's own agent ids
    are ``<gateway label>:<project>``, and ``create_api_token`` labels end in ``-token``)."""
    text = m.string
    op_start, op_end = m.span("op")
    glued = op_start == m.end("key") and op_end == m.start("v4")
    if text[op_start:op_end] != ":" or not glued:
        return False
    return text[m.start("key") - 1 : m.start("key")] == "-" and bool(_GLUED_PATH.match(value))


def _check_assignment(m: re.Match) -> bool:
    if not _key_is_secret_name(m):
        return False
    key = m.group("key").lower()
    value, quoted = _value(m)
    if not quoted and m.group("v4") is not None and _is_label_and_path(m, value):
        return False
    if _is_placeholder(value) or _names_itself(value) or value.startswith("arn:"):
        return False  # an AWS resource name identifies, it does not authenticate
    if key == "pwd" and value[0] in "/~.":
        return False  # a working directory
    if quoted:
        if _TEMPLATE.search(value):
            return False  # 'IDENTIFIED BY "%(password)s"', f"{prefix}-token"
    elif _is_code_value(m, value):
        return False
    if _is_password_key(key):
        return True
    if key in ("token", "auth") or key.startswith("cred"):
        # Vague names (tokenizers, auth modes...): the value itself must look minted.
        return _looks_minted(value)
    # secret / *_key: any single-word value; prose in such a field is text.
    return not any(c.isspace() for c in value)


def _assignment_kind(m: re.Match) -> str:
    return "password_assignment" if _is_password_key(m.group("key")) else "secret_assignment"


# -- command-line flags: --password X, --api-key=X -------------------------------------

_CLI_FLAG = re.compile(
    r"(?P<key>pass(?:word|wd)?|token|secret|key)(?:=|[ \t]+)" + _VALUE,
)
_FLAG_NAME = re.compile(r"(?:^|(?<=[\s\"'=]))--((?:[a-z0-9]+-)*)$")
_FLAG_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "client", "auth"})


def _check_cli_flag(m: re.Match) -> bool:
    start = m.start("key")
    flag = _FLAG_NAME.search(m.string, max(0, start - 40), start)
    if flag is None:
        return False  # not a --long-option
    key = m.group("key")
    if key == "key" and flag.group(1).rstrip("-").rsplit("-", 1)[-1] not in _FLAG_KEY_QUALIFIERS:
        return False
    value, quoted = _value(m)
    if _is_placeholder(value) or value.startswith("-"):
        return False
    separated_by_space = m.string[m.end("key")] != "="
    if separated_by_space and not quoted and value.isalpha() and value.islower():
        return False  # "use --token with care", "the --password option": prose about flags
    if _is_password_key(key):
        return True
    return quoted or _looks_minted(value)


# -- client programs that take a password inline ---------------------------------------

_CLI_PASSWORD = re.compile(
    r"(?:(?<![\w-])mysql(?:dump|admin)?\b[^\n;|&]{0,300}?[ \t]-p"
    r"|(?<![\w-])sshpass[ \t]+-p[ \t]*"
    r"|(?<![\w-])redis-cli\b[^\n;|&]{0,300}?[ \t]-a[ \t]+"
    r"|login(?<=docker login)\b[^\n;|&]{0,300}?[ \t]-p[ \t]+)"
    r"""(?:'(?P<v3>[^'\n]{1,256})'|"(?P<v1>[^"\n]{1,256})"|(?P<v4>[^\s'"]{1,256}))"""
)


def _check_cli_password(m: re.Match) -> bool:
    return not _is_placeholder(_value(m)[0])


_NETRC = re.compile(r"login[ \t]+\S+[ \t]+password[ \t]+(?P<v4>\S+)")

# -- URLs with credentials -------------------------------------------------------------

_URL_PASSWORD = re.compile(
    r"://(?P<user>[^\s:/?#@\"'<>\[\]\\]{0,256}):(?P<v4>[^\s/\"'<>\\]{1,256})"
    # up to the last '@' before the host: passwords are often pasted unencoded
    r"@(?=[^\s@/\"'<>\\]*(?:[/\s\"'<>\\?#]|$))"
)


def _check_url_password(m: re.Match) -> bool:
    value = m.group("v4")
    if _is_placeholder(value) or value.lower() in _SELF_NAMES:
        return False  # user:password@host in documentation
    return not (value.isdigit() and len(value) <= 5)  # host:port, not user:password


# -- HTTP authorization ----------------------------------------------------------------

_AUTH_HEADER = re.compile(
    r"(?<![A-Za-z])(?:[Aa]uthorization|AUTHORIZATION)[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*"
    r"(?:(?P<scheme>[Bb]earer|BEARER|[Bb]asic|BASIC|[Tt]oken|TOKEN|[Bb]ot|Digest|Negotiate"
    r"|NTLM|AWS4-HMAC-SHA256)[ \t]+)?"
    r"(?P<v4>[A-Za-z0-9._~+/=-]{4,4096})"
)


def _check_auth_header(m: re.Match) -> bool:
    value = m.group("v4")
    if _is_placeholder(value):
        return False
    scheme = m.group("scheme")
    if scheme is None:
        # A bare value right after the name has to look like a credential, not code.
        if m.string[m.end() : m.end() + 1] in ("(", "[") or _DOTTED_NAME.fullmatch(value):
            return False
        return _looks_minted(value)
    # Digest and SigV4 carry one-time signatures and key ids, nothing reusable.
    return scheme not in ("Digest", "AWS4-HMAC-SHA256")


def _auth_header_kind(m: re.Match) -> str:
    scheme = (m.group("scheme") or "").lower()
    if scheme == "basic":
        return "basic_auth"
    if scheme in ("bearer", "token"):
        return "bearer_token"
    return "authorization_header"


_BEARER = re.compile(r"(?<![A-Za-z])(?:[Bb]earer|BEARER)[ \t]+(?P<v4>[A-Za-z0-9._~+/=-]{16,4096})")


def _check_bearer(m: re.Match) -> bool:
    value = m.group("v4")
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_CURL_USER = re.compile(
    r"curl\b[^\n]{0,500}?[ \t](?:-u|--user)(?:[ \t]*|=)[\"']?(?P<user>[^\s:\"']+):(?P<v4>[^\s\"']+)"
)


def _check_curl_user(m: re.Match) -> bool:
    value = m.group("v4")
    return not _is_placeholder(value)


# -- blocks and cloud-specific contexts ----------------------------------------------------

_PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    # the body stops at another BEGIN line, so a pile of headers stays linear
    r"(?:(?:[^-]|-(?!----BEGIN)){0,20000}?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    # a truncated block: its header lines and the base64 lines that follow, with real or
    # JSON-escaped newlines. A bare BEGIN line (a mention, not a key) is left alone.
    r"|(?:(?:\\r|\r)?(?:\\n|\n)[A-Za-z-]{1,40}: [^\n\\]{0,200})*(?:(?:\\r|\r)?(?:\\n|\n))?"
    r"(?:(?:\\r|\r)?(?:\\n|\n)[A-Za-z0-9+/=]{16,200})+)"
)

_AWS_SECRET = re.compile(
    r"[Ss][Ee][Cc][Rr][Ee][Tt][_-]?(?P<access>[Aa][Cc][Cc][Ee][Ss][Ss][_-]?)?[Kk][Ee][Yy]"
    r"(?:\\?[\"'])?(?:[ \t]*(?::=|=>|=|:)[ \t]*|[ \t]+)(?:\\?[\"'])?"
    r"(?P<v4>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)
_AWS_PREFIX = re.compile(r"[Aa][Ww][Ss][_-]?$")


def _check_aws_secret(m: re.Match) -> bool:
    if m.group("access") is None and not _AWS_PREFIX.search(m.string, max(0, m.start() - 4)):
        return False  # plain secret_key: left to the generic rule
    # A hex SHA-1 named secret_key is not an AWS secret; those are base64 with capitals.
    return any(c.isupper() for c in m.group("v4"))


_RULES: tuple[_Rule, ...] = (
    _Rule("private_key", (("BEGIN", 5),), _PRIVATE_KEY),
    _Rule(
        "aws_access_key",
        (("AKIA", 0), ("ASIA", 0), ("ABIA", 0), ("ACCA", 0), ("A3T", 0)),
        _token(r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ),
    _Rule(
        "github_token",
        (("ghp_", 0), ("gho_", 0), ("ghu_", 0), ("ghs_", 0), ("ghr_", 0), ("github_pat_", 0)),
        _token(
            r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{30,255})"
            r"(?![A-Za-z0-9])"
        ),
    ),
    _Rule(
        "gitlab_token",
        tuple((p, 0) for p in ("glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "glsoat-")),
        _token(rf"gl(?:pat|ptt|dt|rt|cbt|soat)-[{_URLSAFE}.]{{20,100}}{_TAIL}"),
    ),
    _Rule(
        "slack_token",
        (("xox", 0),),
        _token(r"(?<![A-Za-z0-9])xox[abposer]-[A-Za-z0-9-]{10,250}(?<!-)"),
    ),
    _Rule(
        "slack_webhook",
        (("ck.com/", len("hooks.sla")),),
        _token(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,300}"),
    ),
    _Rule(
        "anthropic_key",
        (("k-", 1),),
        _token(rf"(?<![{_URLSAFE}])sk-ant-[{_URLSAFE}]{{20,300}}"),
    ),
    _Rule(
        "openai_key",
        (("k-", 1),),
        _token(rf"(?<![{_URLSAFE}])sk-(?!ant-)(?P<body>[{_URLSAFE}]{{20,300}}){_TAIL}"),
        check=lambda m: _mixed_alnum(m.group("body")),
    ),
    _Rule(
        "stripe_key",
        (("k_live", 1), ("k_test", 1), ("c_", len("whse"))),
        _token(
            r"(?<![A-Za-z0-9])(?:[sr]k_(?:live|test)_[A-Za-z0-9]{10,250}"
            r"|whsec_[A-Za-z0-9+/=]{20,100})(?![A-Za-z0-9])"
        ),
    ),
    _Rule("google_api_key", (("AIza", 0),), _token(rf"AIza[{_URLSAFE}]{{30,60}}{_TAIL}")),
    _Rule(
        "google_oauth_secret", (("GOCSPX-", 0),), _token(rf"GOCSPX-[{_URLSAFE}]{{20,60}}{_TAIL}")
    ),
    _Rule("google_oauth_token", (("ya29.", 0),), _token(rf"ya29\.[{_URLSAFE}]{{20,2048}}{_TAIL}")),
    _Rule(
        "jwt",
        (("yJ", 1),),
        _token(
            rf"(?<![{_URLSAFE}])eyJ[{_URLSAFE}]{{5,8192}}+\.eyJ[{_URLSAFE}]{{5,8192}}+"
            rf"\.[{_URLSAFE}]{{0,8192}}+"
        ),
    ),
    _Rule(
        "npm_token",
        (("pm_", 1),),
        _token(r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{36,40}(?![A-Za-z0-9])"),
    ),
    _Rule("pypi_token", (("pypi-", 0),), _token(rf"pypi-Ag[{_URLSAFE}]{{50,1000}}")),
    _Rule(
        "sendgrid_key",
        (("SG.", 0),),
        _token(rf"SG\.[{_URLSAFE}]{{16,32}}\.[{_URLSAFE}]{{30,64}}{_TAIL}"),
    ),
    _Rule(
        "twilio_key",
        (("SK", 0),),
        _token(r"(?<![A-Za-z0-9])SK(?P<body>[0-9a-fA-F]{32})(?![A-Za-z0-9])"),
        check=lambda m: (
            any(c.isalpha() for c in m.group("body")) and any(c.isdigit() for c in m.group("body"))
        ),
    ),
    _Rule(
        "huggingface_token",
        (("f_", 1),),
        _token(r"(?<![A-Za-z0-9_])hf_(?P<body>[A-Za-z0-9]{30,64})(?![A-Za-z0-9])"),
        check=lambda m: (
            any(c.isupper() for c in m.group("body")) and any(c.islower() for c in m.group("body"))
        ),
    ),
    _Rule("heroku_key", (("HRKU-", 0),), _token(rf"HRKU-[{_URLSAFE}]{{20,100}}{_TAIL}")),
    _Rule(
        "discord_webhook",
        (("cord", 3),),
        _token(r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/[A-Za-z0-9_-]{30,100}"),
        cased=False,
    ),
    _Rule(
        "discord_token",
        (("cord", 0),),
        _token(
            rf"(?<![{_URLSAFE}.])[MNO][{_URLSAFE}]{{23,27}}\.[{_URLSAFE}]{{6}}"
            rf"\.[{_URLSAFE}]{{27,40}}(?![{_URLSAFE}.])"
        ),
        cased=False,
        check=lambda m: _mixed_alnum(m.group(0)),
        scan=200,  # bot tokens carry no prefix: look just after the word "discord"
    ),
    _Rule(
        "azure_storage_key",
        (("AccountKey=", 0), ("SharedAccessKey=", 0)),
        _token(r"(?:AccountKey|SharedAccessKey)=(?P<v4>[A-Za-z0-9+/]{30,100}={0,2})"),
        groups=("v4",),
    ),
    _Rule(
        "azure_client_secret",
        (("Q~", 4),),
        _token(r"(?<![\w~.-])[\w~.-]{3}[0-9]Q~[\w~.-]{31,34}(?![\w~.-])"),
    ),
    _Rule(
        "azure_sas_token",
        (("&sig=", 0), ("?sig=", 0)),
        _token(r"[?&]sig=(?P<v4>[A-Za-z0-9%+/=]{20,200})"),
        groups=("v4",),
    ),
    _Rule(
        "url_password",
        (("://", 0),),
        _URL_PASSWORD,
        groups=("v4",),
        check=_check_url_password,
    ),
    _Rule(
        "authorization_header",
        (("uth", 1),),
        _AUTH_HEADER,
        cased=False,
        groups=("v4",),
        check=_check_auth_header,
        kind_of=_auth_header_kind,
    ),
    _Rule(
        "bearer_token",
        # Case-sensitive on purpose: a lowercase "b" anchor would fire all over hex ids.
        (("Bearer", 0), ("BEARER", 0)),
        _BEARER,
        groups=("v4",),
        check=_check_bearer,
    ),
    _Rule(
        "basic_auth",
        (("curl", 0),),
        _CURL_USER,
        cased=False,
        groups=("v4",),
        check=_check_curl_user,
    ),
    _Rule(
        "cli_password",
        (("ysql", 1), ("pass", len("ssh")), ("cli", len("redis-")), ("gin", len("lo"))),
        _CLI_PASSWORD,
        cased=False,
        groups=_VALUE_GROUPS,
        check=_check_cli_password,
    ),
    _Rule(
        "netrc_password",
        (("gin", len("lo")),),
        _NETRC,
        cased=False,
        groups=("v4",),
        check=lambda m: not _is_placeholder(m.group("v4")),
    ),
    _Rule(
        "aws_secret_key",
        (("cret", 2),),
        _AWS_SECRET,
        cased=False,
        groups=("v4",),
        check=_check_aws_secret,
    ),
    _Rule(
        "secret_assignment",
        (("pass", 0), ("ken", 2), ("cret", 2), ("key", 0)),
        _CLI_FLAG,
        cased=False,
        groups=_VALUE_GROUPS,
        check=_check_cli_flag,
        kind_of=_assignment_kind,
    ),
    _Rule(
        "secret_assignment",
        (("pass", 0), ("pwd", 0), ("cret", 2), ("ken", 2), ("uth", 1), ("cred", 0), ("key", 0)),
        _ASSIGNMENT,
        cased=False,
        groups=_VALUE_GROUPS,
        check=_check_assignment,
        kind_of=_assignment_kind,
    ),
)


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


def _trie_regex(spellings: list[tuple[str, ...]]) -> str:
    trie: dict = {}
    for atoms in spellings:
        node = trie
        for atom in atoms:
            node = node.setdefault(atom, {})
        node[""] = {}

    def emit(node: dict) -> str:
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


def _build_prefilter() -> tuple[re.Pattern, re.Pattern, dict[str, tuple[tuple[int, int], ...]]]:
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
        shown = redact_text(raw)
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
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
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
        if _unchanged(value, memo):
            return value
    # An explicit stack instead of recursion: no payload depth can exhaust the C stack.
    root: dict | list = {} if isinstance(value, dict) else []
    stack: list[tuple[dict | list | tuple, dict | list]] = [(value, root)]
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


def _unchanged(value: dict | list | tuple, memo: dict[str, str]) -> bool:
    """Whether ``redact_value`` would return a structure equal to ``value`` (tuples,
    which it turns into lists, count as changes)."""
    stack: list[object] = [value]
    while stack:
        source = stack.pop()
        if isinstance(source, dict):
            pairs: Iterable[tuple[object, object]] = source.items()
        elif isinstance(source, list):
            pairs = ((None, x) for x in source)
        else:
            return False  # a tuple
        for key, item in pairs:
            if isinstance(key, str) and redact_key(key) is not key:
                return False
            if isinstance(item, str):
                if _redacted_item(key, item, memo) != item:
                    return False
            elif isinstance(item, (dict, list, tuple)):
                stack.append(item)
    return True


def _redacted_item(key: object, item: str, memo: dict[str, str] | None) -> str:
    """One string of a structure: whole when its key names a secret, else its text
    redacted (through ``memo`` when there is one)."""
    kind = _secret_key_kind(key) if item and isinstance(key, str) else None
    if kind is not None:
        return item if _is_marker(item) else _marker(kind)
    return redact_text(item) if memo is None else redact_shared(item, memo)


def redact_shared(text: str, memo: dict[str, str]) -> str:
    """``redact_text`` through a memo shared with other calls (see ``redact_value``)."""
    result = memo.get(text)
    if result is None:
        result = memo[text] = redact_text(text)
    return result
