"""Secret redaction for everything SessionHub stores.

Every string of every ingested event passes through :func:`redact_text`, so the common
case (a string holding no secret at all) has to be close to free. The engine therefore
works like a keyword-gated scanner:

* Each rule owns a handful of short literal *fragments* that any of its matches must
  contain (``ghp_`` for GitHub tokens, ``pass`` for password assignments...).
* All fragments are compiled into one prefilter regex shaped as a trie whose branches
  start with literal characters. CPython's regex engine then skips every position whose
  character cannot start a fragment, and the fragments were picked to start on
  characters that are rare in prose and code (``k`` of ``token``, ``c`` of ``secret``)
  rather than on ``e``/``t``/``a``/``s``.
* Only when the prefilter finds fragments are the rules that own them run, in a fixed
  order: exact token formats first, then headers and command lines, then the generic
  ``key = value`` assignments, which look at entropy-free context (the key's name) and
  never at bare high-entropy strings, so git SHAs, UUIDs and digests survive.

A secret becomes ``[REDACTED:<type>]``. Markers are never matched again, and redaction
is repeated until nothing changes, so ``redact_text(redact_text(t)) == redact_text(t)``.

Pure Python, no Django: importable from the hook client, workers and benchmarks alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RULES_VERSION", "contains_secret", "redact_text", "redact_value"]

# Stored rows record the version they were redacted with; bump on any rule change so
# the background job knows which rows to redact again.
RULES_VERSION = 1

_MARKER_PREFIX = "[REDACTED:"
# Upper bound on redaction rounds. One round almost always suffices; a second one only
# happens when a rule uncovers context for another (see redact_text).
_MAX_ROUNDS = 4


def _marker(kind: str) -> str:
    return f"{_MARKER_PREFIX}{kind}]"


# ---------------------------------------------------------------------------------------
# Prefilter construction
# ---------------------------------------------------------------------------------------


def _atoms(fragment: str, cased: bool) -> list[list[str]]:
    """Spell a fragment as regex atoms; one spelling per case of its first letter.

    The first atom stays a plain literal so that the compiled trie keeps literal-led
    branches, which is what lets the engine skip non-candidate positions cheaply.
    """
    rest = []
    for ch in fragment[1:]:
        if not cased and ch.isalpha():
            rest.append(f"[{ch.upper()}{ch.lower()}]")
        else:
            rest.append(re.escape(ch))
    first = fragment[0]
    if cased or not first.isalpha():
        return [[re.escape(first), *rest]]
    return [[first.upper(), *rest], [first.lower(), *rest]]


def _trie_regex(spellings: list[list[str]]) -> str:
    trie: dict = {}
    for atoms in spellings:
        node = trie
        for atom in atoms:
            node = node.setdefault(atom, {})
        node[""] = {}

    def emit(node: dict) -> str:
        if "" in node:
            # A complete fragment ends here: longer ones add nothing to a presence test.
            return ""
        branches = [atom + emit(child) for atom, child in sorted(node.items())]
        if len(branches) == 1:
            return branches[0]
        return "(?:" + "|".join(branches) + ")"

    return emit(trie)


# ---------------------------------------------------------------------------------------
# Value heuristics shared by context rules
# ---------------------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DOTTED_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+")
_ENV_REFERENCE = re.compile(r"\$(?:\{|\(|[A-Za-z_][A-Za-z0-9_]*$)")
_MASKED = re.compile(r"([*xX.•#-])\1{2,}")
# Words that show up after "password:"/"token =" in type annotations, schemas, configs
# and code, where no secret value is present.
_NON_VALUES = frozenset(
    {
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "string",
        "str",
        "bytes",
        "text",
        "int",
        "bool",
        "boolean",
        "number",
        "object",
        "any",
        "optional",
        "required",
        "redacted",
        "hidden",
        "masked",
        "env",
        "placeholder",
    }
)
_KEY_WORDS = ("pass", "pwd", "secret", "token", "key", "auth", "cred")


def _is_placeholder(value: str) -> bool:
    """True for values that stand in for a secret rather than being one."""
    if not value or value.startswith(_MARKER_PREFIX) or _MARKER_PREFIX in value:
        return True
    first = value[0]
    if first == "$" and _ENV_REFERENCE.match(value):
        return True
    if first == "%" and (value.startswith("%(") or value in ("%s", "%d")):
        return True
    if first in "{<" or value.startswith("#{"):
        return True
    if _MASKED.fullmatch(value):
        return True
    return value.lower() in _NON_VALUES


def _looks_like_token(value: str) -> bool:
    """Rough shape test for machine-made credentials (used where the key is vague)."""
    if len(value) < 8 or any(c.isspace() for c in value):
        return False
    has_digit = any(c.isdigit() for c in value)
    has_upper = any(c.isupper() for c in value)
    has_lower = any(c.islower() for c in value)
    has_symbol = any(not c.isalnum() and c not in "-_./" for c in value)
    return has_digit or has_symbol or (has_upper and has_lower and len(value) >= 16)


def _mixed_alnum(value: str) -> bool:
    """Random base62 strings virtually always mix digits and both letter cases."""
    return (
        any(c.isdigit() for c in value)
        and any(c.isupper() for c in value)
        and any(c.islower() for c in value)
    )


def _is_prose_word(m: re.Match, value: str) -> bool:
    """A lowercase word followed by more words reads as a sentence, not a credential."""
    if not value.isalpha():
        return False
    rest = m.string[m.end() : m.end() + 2]
    return len(rest) == 2 and rest[0] in " \t" and rest[1].isalpha()


# ---------------------------------------------------------------------------------------
# Rules
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rule:
    kind: str
    fragments: tuple[str, ...]  # each must occur in every match (prefilter keys)
    cased: bool  # whether fragments are case-sensitive
    pattern: re.Pattern
    groups: tuple[str, ...] = ()  # value group(s) to replace; empty means whole match
    check: Callable[[re.Match], bool] | None = None
    kind_of: Callable[[re.Match], str] | None = None  # when the type depends on the match

    def value_span(self, m: re.Match) -> tuple[int, int]:
        for name in self.groups:
            if m.group(name) is not None:
                return m.span(name)
        return m.span()

    def accepts(self, m: re.Match) -> bool:
        start, end = self.value_span(m)
        if _MARKER_PREFIX in m.string[start:end]:
            return False
        return self.check is None or self.check(m)

    def replace(self, m: re.Match) -> str:
        if not self.accepts(m):
            return m.group(0)
        kind = self.kind_of(m) if self.kind_of else self.kind
        start, end = self.value_span(m)
        whole = m.group(0)
        offset = m.start()
        return whole[: start - offset] + _marker(kind) + whole[end - offset :]


# Character sets used by several rules.
_B62 = "A-Za-z0-9"
_URLSAFE = r"A-Za-z0-9_\-"
_TAIL = r"(?![A-Za-z0-9_-])"

# Values after an assignment operator: double quoted, JSON-escaped double quoted (a JSON
# document stored as a string), single quoted, or bare up to a delimiter.
_VALUE = (
    r"""(?:"(?P<v1>(?:[^"\\\n]|\\[^\n]){1,512})\""""
    r"""|\\"(?P<v2>(?:[^"\\\n]|\\[^"\n]){1,512})\\\""""
    r"""|'(?P<v3>[^'\n]{1,512})'"""
    r"""|(?P<v4>[^\s"'`,;&|<>(){}\[\]\\]{1,512}))"""
)
_VALUE_GROUPS = ("v1", "v2", "v3", "v4")


def _value(m: re.Match) -> tuple[str, bool]:
    """The captured value and whether it was quoted."""
    for name in _VALUE_GROUPS:
        value = m.group(name)
        if value is not None:
            return value, name != "v4"
    return "", False


_PASSWORD_WORDS = ("pass", "pwd")


def _is_password_key(key: str) -> bool:
    key = key.lower()
    return any(word in key for word in _PASSWORD_WORDS)


# -- generic `key = value` assignments -------------------------------------------------

# Secret-naming keys. Case is spelled out per letter instead of using re.IGNORECASE,
# which would stop the engine from skipping ahead to candidate first letters.
_ASSIGN_KEY = (
    r"(?P<key>"
    r"[Pp][Aa][Ss][Ss](?:[Ww][Oo][Rr][Dd]|[Ww][Dd]|[Pp][Hh][Rr][Aa][Ss][Ee])"
    r"|(?<![A-Za-z])[Pp][Aa][Ss][Ss]"
    r"|(?<=[_;-])[Pp][Ww][Dd]"
    r"|[Ss][Ee][Cc][Rr][Ee][Tt](?:[_-]?(?:[Aa][Cc][Cc][Ee][Ss][Ss][_-]?)?[Kk][Ee][Yy])?"
    r"|[Tt][Oo][Kk][Ee][Nn]"
    r"|(?<![A-Za-z])[Aa][Uu][Tt][Hh]"
    r"|[Cc][Rr][Ee][Dd][Ee][Nn][Tt][Ii][Aa][Ll][Ss]?"
    r"|(?:[Aa][Pp][Ii]|[Aa][Cc][Cc][Ee][Ss][Ss]|[Pp][Rr][Ii][Vv][Aa][Tt][Ee]"
    r"|[Ss][Ii][Gg][Nn][Ii][Nn][Gg]|[Ee][Nn][Cc][Rr][Yy][Pp][Tt][Ii][Oo][Nn]"
    r"|[Mm][Aa][Ss][Tt][Ee][Rr]|[Aa][Cc][Cc][Oo][Uu][Nn][Tt]|[Dd][Ee][Pp][Ll][Oo][Yy]"
    r"|[Ss][Ss][Hh])[_-]?[Kk][Ee][Yy]"
    r")(?![A-Za-z0-9_-])"
)

_ASSIGNMENT = re.compile(
    _ASSIGN_KEY
    # an optional closing quote of a JSON/dict key, then the operator on the same line
    + r"""(?:\\?["'])?[ \t]*(?P<op>:=|=>|==|=|:)(?![=:])[ \t]*"""
    + _VALUE
)


def _check_assignment(m: re.Match) -> bool:
    key = m.group("key").lower()
    value, quoted = _value(m)
    if _is_placeholder(value):
        return False
    is_password = _is_password_key(key)
    if key.endswith("pwd") and value[0] in "/~.":
        return False  # $PWD-style working directories, not passwords
    if not quoted:
        nxt = m.string[m.end() : m.end() + 1]
        if nxt in ("(", "["):
            return False  # a call or subscript: token = request.headers.get(...)
        if _DOTTED_NAME.fullmatch(value):
            return False  # an attribute path: password = settings.DB_PASSWORD
        if _IDENTIFIER.fullmatch(value):
            lowered = value.lower()
            if "_" in value or any(word in lowered for word in _KEY_WORDS):
                return False  # a variable: password = user_password, token=token
            if nxt in (",", ")"):
                return False  # a keyword argument passing a variable along
        if m.group("op") == ":" and _is_prose_word(m, value):
            return False  # "Password: must be at least 8 characters"
    if is_password or key.startswith("secret") or key.endswith("key"):
        # Strong names: any real value counts, but prose in a non-password field is text.
        if not is_password and quoted and any(c.isspace() for c in value):
            return False
        return True
    # token / auth / credentials: vague names, so the value itself must look minted.
    return _looks_like_token(value)


def _assignment_kind(m: re.Match) -> str:
    return "password_assignment" if _is_password_key(m.group("key")) else "secret_assignment"


# -- command-line flags -----------------------------------------------------------------

_CLI_FLAG = re.compile(
    r"--(?:[A-Za-z0-9]+-)*(?P<key>password|passwd|pass|token|secret|api-key|apikey"
    r"|access-key|secret-key|client-secret|private-key)(?:=|[ \t]+)" + _VALUE
)


def _check_cli_flag(m: re.Match) -> bool:
    value, quoted = _value(m)
    if _is_placeholder(value) or (not quoted and value.startswith("-")):
        return False
    if not quoted and m.group(0)[m.start("key") - m.start() + len(m.group("key"))] != "=":
        # "--token with your token": a flag named in a sentence, not given a value.
        if _is_prose_word(m, value):
            return False
    if not _is_password_key(m.group("key")):
        return _looks_like_token(value) or quoted
    return True


# -- client programs that take a password inline ---------------------------------------

_CLI_PASSWORD = re.compile(
    r"(?:\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b[^\n;|&]*?[ \t]-p"
    r"|\bsshpass[ \t]+-p[ \t]*"
    r"|\bredis-cli\b[^\n;|&]*?[ \t]-a[ \t]+"
    r"|\bdocker[ \t]+login\b[^\n;|&]*?[ \t]-p[ \t]+)"
    r"""(?:'(?P<v3>[^'\n]{1,256})'|"(?P<v1>[^"\n]{1,256})"|(?P<v4>[^\s'"]{1,256}))"""
)


def _check_cli_password(m: re.Match) -> bool:
    value, _quoted = _value(m)
    return not _is_placeholder(value)


# -- URLs with credentials ----------------------------------------------------------------

_URL_PASSWORD = re.compile(
    r"://(?P<user>[^\s:/?#@\"'<>\[\]\\]{0,256}):(?P<v4>[^\s/\"'<>\\]{1,256})"
    # the last '@' before the host: passwords are often pasted unencoded
    r"@(?=[^\s@/\"'<>\\]*(?:[/\s\"'<>\\?#]|$))"
)


def _check_url_password(m: re.Match) -> bool:
    value = m.group("v4")
    if _is_placeholder(value):
        return False
    # host:port@... is not a password; ports are at most five digits.
    return not (value.isdigit() and len(value) <= 5)


# -- HTTP authorization ----------------------------------------------------------------

_AUTH_HEADER = re.compile(
    r"(?:[Aa]uthorization|AUTHORIZATION)[\"']?[ \t]*[:=][ \t]*[\"']?[ \t]*"
    r"(?:(?P<scheme>[Bb]earer|BEARER|[Bb]asic|BASIC|[Tt]oken|TOKEN|[Bb]ot)[ \t]+)?"
    r"(?P<v4>[A-Za-z0-9._~+/=-]{4,})"
)


def _check_auth_header(m: re.Match) -> bool:
    value = m.group("v4")
    if m.group("scheme") is None:
        # A bare value right after the header name must look like a credential.
        return value.lower() not in ("bearer", "basic", "token") and _looks_like_token(value)
    return not _is_placeholder(value)


def _auth_header_kind(m: re.Match) -> str:
    scheme = (m.group("scheme") or "").lower()
    if scheme == "basic":
        return "basic_auth"
    if scheme in ("bearer", "token"):
        return "bearer_token"
    return "authorization_header"


_BEARER = re.compile(r"(?<![A-Za-z])(?:[Bb]earer|BEARER)[ \t]+(?P<v4>[A-Za-z0-9._~+/=-]{16,})")


def _check_bearer(m: re.Match) -> bool:
    value = m.group("v4")
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_CURL_USER = re.compile(
    r"\bcurl\b[^\n]*?[ \t](?:-u|--user)(?:[ \t]*|=)[\"']?"
    r"(?P<user>[^\s:\"']+):(?P<v4>[^\s\"']+)"
)


def _check_curl_user(m: re.Match) -> bool:
    value = m.group("v4")
    return not _is_placeholder(value) and not (value.isdigit() and m.group("user").isdigit())


# -- files and blocks --------------------------------------------------------------------

_PRIVATE_KEY = re.compile(
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[\s\S]{0,20000}?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    # Truncated block: take the base64 lines that follow, real or JSON-escaped newlines.
    r"|(?:(?:\\r|\r)?(?:\\n|\n)[A-Za-z0-9+/=]{1,200})*)"
)

_NETRC = re.compile(r"\blogin[ \t]+\S+[ \t]+password[ \t]+(?P<v4>\S+)")


def _check_netrc(m: re.Match) -> bool:
    return not _is_placeholder(m.group("v4"))


_AWS_SECRET = re.compile(
    r"(?:[Aa][Ww][Ss][_-]?)?[Ss][Ee][Cc][Rr][Ee][Tt][_-]?(?:[Aa][Cc][Cc][Ee][Ss][Ss][_-]?)?"
    r"[Kk][Ee][Yy](?:\\?[\"'])?(?:[ \t]*(?::=|=>|=|:)[ \t]*|[ \t]+)(?:\\?[\"'])?"
    r"(?P<v4>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)


def _check_aws_secret(m: re.Match) -> bool:
    # A 40-character value could be a hex SHA-1 that someone named secret_key; real
    # AWS secrets are base64 and contain upper-case letters.
    return any(c.isupper() for c in m.group("v4"))


def _tok(body: str) -> re.Pattern:
    return re.compile(body)


_RULES: tuple[_Rule, ...] = (
    _Rule("private_key", ("-----BEGIN",), True, _PRIVATE_KEY),
    _Rule(
        "aws_access_key",
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
        True,
        _tok(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ),
    _Rule(
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        True,
        _tok(
            r"g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{30,255}|ithub_pat_[A-Za-z0-9_]{30,255})"
            r"(?![A-Za-z0-9])"
        ),
    ),
    _Rule(
        "gitlab_token",
        ("glpat-", "glptt-", "gldt-", "glrt-", "glcbt-", "glsoat-", "glffct-"),
        True,
        _tok(rf"gl(?:pat|ptt|dt|rt|cbt|soat|ffct)-[{_URLSAFE}.]{{20,100}}{_TAIL}"),
    ),
    _Rule(
        "slack_token",
        ("xox",),
        True,
        _tok(r"x(?<![A-Za-z0-9]x)ox[abposer]-[A-Za-z0-9-]{10,250}(?<!-)"),
    ),
    _Rule(
        "slack_webhook",
        ("hooks.slack.com",),
        True,
        _tok(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,}"),
    ),
    _Rule(
        "anthropic_key",
        ("k-",),
        True,
        _tok(rf"s(?<![A-Za-z0-9_-]s)k-ant-[{_URLSAFE}]{{20,300}}"),
    ),
    _Rule(
        "openai_key",
        ("k-",),
        True,
        _tok(rf"s(?<![A-Za-z0-9_-]s)k-(?!ant-)(?P<body>[{_URLSAFE}]{{20,300}}){_TAIL}"),
        check=lambda m: _mixed_alnum(m.group("body")),
    ),
    _Rule(
        "stripe_key",
        ("k_live", "k_test", "whsec_"),
        True,
        _tok(
            r"(?:[sr]k_(?:live|test)_[A-Za-z0-9]{10,250}|whsec_[A-Za-z0-9+/=]{20,100})"
            r"(?![A-Za-z0-9])"
        ),
    ),
    _Rule(
        "google_api_key",
        ("AIza",),
        True,
        _tok(rf"AIza[{_URLSAFE}]{{30,60}}{_TAIL}"),
    ),
    _Rule(
        "google_oauth_secret",
        ("GOCSPX-",),
        True,
        _tok(rf"GOCSPX-[{_URLSAFE}]{{20,60}}{_TAIL}"),
    ),
    _Rule(
        "google_oauth_token",
        ("ya29.",),
        True,
        _tok(rf"ya29\.[{_URLSAFE}]{{20,2048}}{_TAIL}"),
    ),
    _Rule(
        "jwt",
        ("yJ",),
        True,
        _tok(
            rf"e(?<![{_URLSAFE}]e)yJ[{_URLSAFE}]{{5,}}\.eyJ[{_URLSAFE}]{{5,}}\.[{_URLSAFE}]*"
        ),
    ),
    _Rule("npm_token", ("pm_",), True, _tok(r"npm_[A-Za-z0-9]{36,40}(?![A-Za-z0-9])")),
    _Rule("pypi_token", ("pypi-",), True, _tok(rf"pypi-Ag[{_URLSAFE}]{{50,}}")),
    _Rule(
        "sendgrid_key",
        ("SG.",),
        True,
        _tok(rf"SG\.[{_URLSAFE}]{{16,32}}\.[{_URLSAFE}]{{30,64}}{_TAIL}"),
    ),
    _Rule(
        "twilio_key",
        ("SK",),
        True,
        _tok(r"S(?<![A-Za-z0-9]S)K[0-9a-fA-F]{32}(?![A-Za-z0-9])"),
        check=lambda m: any(c.isalpha() for c in m.group(0)[2:])
        and any(c.isdigit() for c in m.group(0)[2:]),
    ),
    _Rule(
        "huggingface_token",
        ("hf_",),
        True,
        _tok(r"h(?<![A-Za-z0-9_]h)f_[A-Za-z0-9]{30,64}(?![A-Za-z0-9])"),
        check=lambda m: any(c.isupper() for c in m.group(0)) and any(c.islower() for c in m.group(0)[3:]),
    ),
    _Rule("heroku_key", ("HRKU-",), True, _tok(rf"HRKU-[{_URLSAFE}]{{20,100}}{_TAIL}")),
    _Rule(
        "discord_webhook",
        ("cord",),
        False,
        _tok(r"discord(?:app)?\.com/api/webhooks/[0-9]{5,30}/[A-Za-z0-9_-]{30,100}"),
    ),
    _Rule(
        "discord_token",
        ("cord", "ken", "uth"),
        False,
        _tok(
            rf"[MNO](?<![{_URLSAFE}].)[{_URLSAFE}]{{23,27}}\.[{_URLSAFE}]{{6}}"
            rf"\.[{_URLSAFE}]{{27,40}}{_TAIL}"
        ),
        check=lambda m: _mixed_alnum(m.group(0)),
    ),
    _Rule(
        "azure_storage_key",
        ("AccountKey=", "SharedAccessKey="),
        True,
        _tok(r"(?:AccountKey|SharedAccessKey)=(?P<v4>[A-Za-z0-9+/]{30,100}={0,2})"),
        groups=("v4",),
    ),
    _Rule(
        "azure_client_secret",
        ("Q~",),
        True,
        _tok(r"(?<![\w~.-])[\w~.-]{3}[0-9]Q~[\w~.-]{31,34}(?![\w~.-])"),
    ),
    _Rule(
        "azure_sas_token",
        ("&sig=", "?sig="),
        True,
        _tok(r"[?&]sig=(?P<v4>[A-Za-z0-9%+/=]{20,200})"),
        groups=("v4",),
    ),
    _Rule(
        "url_password",
        ("://",),
        True,
        _URL_PASSWORD,
        groups=("v4",),
        check=_check_url_password,
    ),
    _Rule(
        "authorization_header",
        ("uth",),
        False,
        _AUTH_HEADER,
        groups=("v4",),
        check=_check_auth_header,
        kind_of=_auth_header_kind,
    ),
    _Rule("bearer_token", ("bearer",), False, _BEARER, groups=("v4",), check=_check_bearer),
    _Rule("basic_auth", ("curl",), False, _CURL_USER, groups=("v4",), check=_check_curl_user),
    _Rule(
        "cli_password",
        ("ysql", "mariadb", "pass", "-cli", "login"),
        False,
        _CLI_PASSWORD,
        groups=_VALUE_GROUPS,
        check=_check_cli_password,
    ),
    _Rule("netrc_password", ("pass",), False, _NETRC, groups=("v4",), check=_check_netrc),
    _Rule("aws_secret_key", ("cret",), False, _AWS_SECRET, groups=("v4",), check=_check_aws_secret),
    _Rule(
        "secret_assignment",
        ("pass", "ken", "cret", "-key", "cesskey", "vatekey"),
        False,
        _CLI_FLAG,
        groups=_VALUE_GROUPS,
        check=_check_cli_flag,
        kind_of=_assignment_kind,
    ),
    _Rule(
        "secret_assignment",
        ("pass", "pwd", "cret", "ken", "uth", "cred", "_key", "-key", "pik", "cesskey", "vatekey"),
        False,
        _ASSIGNMENT,
        groups=_VALUE_GROUPS,
        check=_check_assignment,
        kind_of=_assignment_kind,
    ),
    # camelCase keys (apiKey, signingKey...) are found through their capitalised "Key".
    _Rule(
        "secret_assignment",
        ("Key", "KEY"),
        True,
        _ASSIGNMENT,
        groups=_VALUE_GROUPS,
        check=_check_assignment,
        kind_of=_assignment_kind,
    ),
)


def _build_prefilter() -> tuple[re.Pattern, dict[str, tuple[int, ...]]]:
    owners: dict[str, set[int]] = {}
    spellings: list[list[str]] = []
    for index, rule in enumerate(_RULES):
        for fragment in rule.fragments:
            owners.setdefault(fragment.lower(), set()).add(index)
            spellings.extend(_atoms(fragment, rule.cased))
    # A fragment that is a prefix of another would hide it from findall(); keep them apart.
    keys = sorted(owners)
    for a in keys:
        for b in keys:
            if a != b and b.startswith(a):
                raise AssertionError(f"prefilter fragment {a!r} is a prefix of {b!r}")
    unique = {tuple(s): s for s in spellings}
    pattern = re.compile(_trie_regex(list(unique.values())))
    return pattern, {key: tuple(sorted(ids)) for key, ids in owners.items()}


_PREFILTER, _FRAGMENT_OWNERS = _build_prefilter()
_prefilter_search = _PREFILTER.search
_prefilter_findall = _PREFILTER.findall


def _candidate_rules(text: str) -> list[_Rule]:
    ids: set[int] = set()
    for hit in set(_prefilter_findall(text)):
        ids.update(_FRAGMENT_OWNERS[hit.lower()])
    return [_RULES[i] for i in sorted(ids)]


def _redact_once(text: str) -> str:
    for rule in _candidate_rules(text):
        text = rule.pattern.sub(rule.replace, text)
    return text


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def redact_text(text: str) -> str:
    """Return ``text`` with every recognised secret replaced by ``[REDACTED:<type>]``."""
    if not _prefilter_search(text):
        return text
    result = _redact_once(text)
    if result == text:
        return text
    # A replacement can expose context to a rule that ran earlier in the round (a token
    # inside a password value, say); rerun until stable so that redacting twice is a no-op.
    for _ in range(_MAX_ROUNDS - 1):
        again = _redact_once(result)
        if again == result:
            break
        result = again
    return result


def contains_secret(text: str) -> bool:
    """Cheaply tell whether ``redact_text`` would change ``text``."""
    if not _prefilter_search(text):
        return False
    for rule in _candidate_rules(text):
        for m in rule.pattern.finditer(text):
            if rule.accepts(m):
                return True
    return False


# Key names whose string values are secrets in their entirety, by last name segment.
_SECRET_KEY_SEGMENTS = {
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
# A trailing "key" segment only names a secret after one of these.
_KEY_QUALIFIERS = frozenset(
    {"api", "access", "secret", "private", "signing", "encryption", "master", "auth", "account"}
)
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_SEPARATORS = re.compile(r"[^a-z0-9]+")
_key_type_cache: dict[str, str | None] = {}


def _secret_key_type(key: str) -> str | None:
    cached = _key_type_cache.get(key, False)
    if cached is not False:
        return cached
    parts = [p for p in _KEY_SEPARATORS.split(_CAMEL_BOUNDARY.sub("_", key).lower()) if p]
    kind: str | None = None
    if parts:
        last = parts[-1]
        if last in _SECRET_KEY_SEGMENTS:
            kind = _SECRET_KEY_SEGMENTS[last]
        elif last == "key" and len(parts) > 1 and parts[-2] in _KEY_QUALIFIERS:
            kind = f"{parts[-2]}_key"
        elif last in ("pass", "pwd") and len(parts) > 1 and parts[-2] != "old":
            # db_pass / DB_PWD, but not a bare "pwd" (the working directory)
            kind = "password"
    if len(_key_type_cache) < 4096:  # keys repeat endlessly; names are few
        _key_type_cache[key] = kind
    return kind


def _is_marker(value: str) -> bool:
    return value.startswith(_MARKER_PREFIX) and value.endswith("]") and value.count("]") == 1


def _redact_member(key: object, value: object) -> object:
    if isinstance(value, str) and value and isinstance(key, str):
        kind = _secret_key_type(key)
        if kind is not None:
            return value if _is_marker(value) else _marker(kind)
    return value


def redact_value(value: object) -> object:
    """Return a redacted deep copy of a parsed JSON value; secret-named keys lose values."""
    if isinstance(value, str):
        return redact_text(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    # Walk with an explicit stack: payload depth must never hit the recursion limit.
    root: dict | list = {} if isinstance(value, dict) else []
    stack: list[tuple[object, dict | list]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        if isinstance(source, dict):
            items = source.items()
        else:
            items = ((None, item) for item in source)  # type: ignore[union-attr]
        for key, item in items:
            item = _redact_member(key, item)
            if isinstance(item, str):
                copied: object = redact_text(item)
            elif isinstance(item, dict):
                copied = {}
                stack.append((item, copied))
            elif isinstance(item, (list, tuple)):
                copied = []
                stack.append((item, copied))
            else:
                copied = item
            if isinstance(target, dict):
                target[key] = copied
            else:
                target.append(copied)
    return root
