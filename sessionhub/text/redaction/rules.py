"""The rules: each a pattern with its anchors, the groups it redacts and the checks that
keep code and prose from being taken for secrets. Exact token formats first, then headers
and command lines, then generic ``key = value`` assignments."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .values import (
    _CAMEL_BOUNDARY,
    _DOTTED_NAME,
    _IDENTIFIER,
    _MARKER_PREFIX,
    _NAME_WORDS,
    _VALUE,
    _VALUE_GROUPS,
    _is_password_key,
    _is_placeholder,
    _looks_minted,
    _mixed_alnum,
    _value,
)

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
