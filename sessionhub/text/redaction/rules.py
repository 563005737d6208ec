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
    pattern: re.Pattern[str]
    cased: bool = True  # whether the anchors are case-sensitive
    groups: tuple[str, ...] = ()  # group(s) holding the secret; empty: the whole match
    check: Callable[[re.Match[str]], bool] | None = None
    kind_of: Callable[[re.Match[str]], str] | None = None  # type chosen per match
    scan: int = 0  # > 0: search this far past the anchor instead of matching at it
    span_of: Callable[[re.Match[str]], tuple[int, int]] | None = None  # secret chosen per match

    def secret_span(self, m: re.Match[str]) -> tuple[int, int]:
        if self.span_of is not None:
            return self.span_of(m)
        found = m.groupdict()
        for name in self.groups:
            if found.get(name) is not None:
                return m.span(name)
        return m.span()

    def accepts(self, m: re.Match[str]) -> bool:
        start, end = self.secret_span(m)
        if _MARKER_PREFIX in m.string[start:end]:
            return False  # never redact a marker again
        return self.check is None or self.check(m)

    def find(self, text: str, position: int, anchor_start: int) -> re.Match[str] | None:
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


def _token(pattern: str) -> re.Pattern[str]:
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


def _key_is_secret_name(m: re.Match[str]) -> bool:
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
_SELF_NAMES = frozenset(
    "pass passwd password passphrase pwd secret secrets token key apikey auth credentials".split()
)
_CAMEL_WORDS = re.compile(r"[a-z]+(?:[A-Z][a-z]+)+")
_PASCAL_WORDS = re.compile(r"(?:[A-Z][a-z]+)+")
# What follows a value when the next setting comes on the same line (a flattened file).
_NEXT_SETTING = re.compile(r"[ \t]+[A-Za-z_][\w.-]*[ \t]*(?::[ \t]|=[ \t]*[^\s=])")
_INI_SECTION = re.compile(r"(?m)^[ \t]*\[[\w. \"-]{1,60}\][ \t]*$")
_SELF_OBJECTS = ("self.", "this.", "cls.", "@")


def _is_code_value(m: re.Match[str], value: str) -> bool:
    """Whether a bare value is plainly an expression of the surrounding code (a call, an
    attribute chain, a variable passed along) rather than a literal.

    Where the operator is glued to both sides (``PASSWORD=x`` in a shell, an .env file,
    a query string, a properties file) a bare word is a literal: only references count
    as code there. Spaced assignments in source code take variables as code when they
    are shaped like variables (snake_case, camelCase, the key's own name).
    """
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
    if nxt in (",", ")", "}"):
        return True  # a keyword argument or an object entry passing a variable along
    around = text[op_start - 1 : op_start] + text[op_end : op_end + 1]
    if " " not in around and "\t" not in around:
        return False  # PASSWORD=claude_auth_pass: shell, .env, URLs and properties files
    if _NEXT_SETTING.match(text, m.end()):
        return False  # a config flattened onto one line: "password: x_y port: 5432"
    if text[op_start] == ":":
        # YAML: "password: maple_orbit_pass" ending its line is the value itself;
        # "Password: must be set" goes on and is a sentence.
        if _PASCAL_WORDS.fullmatch(value):
            return True  # a type: password: SecretStr
        return nxt == ";" or _continues_line(text, m.end())
    if _INI_SECTION.search(text):
        return False  # an INI/TOML file: password = maple_orbit_pass is a literal
    if nxt == ";" or "_" in value or _CAMEL_WORDS.fullmatch(value):
        return True  # a variable: password = user_password, const token = authToken;
    if value.lower() == m.group("key").lower() or _is_self_attribute(text, m.start()):
        return True  # token = token; self._master_password = value
    # test_pass = await check(user); passwd = acct = ''; Password: must be set
    return _continues_line(text, m.end())


def _is_self_attribute(text: str, index: int) -> bool:
    """Whether the name around ``index`` is an attribute of self/this/cls (or @ivar)."""
    start = _name_start(text, index)
    head = text[max(0, start - 5) : start]
    return head.endswith(_SELF_OBJECTS)


def _continues_line(text: str, index: int) -> bool:
    """Whether more than a comment follows on the line after ``index``."""
    end = text.find("\n", index, index + 200)
    rest = text[index : end if end != -1 else index + 200].strip()
    return bool(rest) and not rest.startswith(("#", "//", ";"))


# What follows "name:" glued to it when the whole is a label and a place, not a key and
# its value: "/home/alice/src/api-v2", "~/src/x", "github.com/acme/web3-app".
_GLUED_PATH = re.compile(r"[/~]|[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/")


def _is_label_and_path(m: re.Match[str], value: str) -> bool:
    """``first-token:/home/alice/src/api-v2``: a hyphenated label that happens to end in a
    secret's word, glued by a colon to a path or a host/path (SessionHub's own agent ids
    are ``<gateway label>:<project>``, and ``create_api_token`` labels end in ``-token``)."""
    text = m.string
    op_start, op_end = m.span("op")
    glued = op_start == m.end("key") and op_end == m.start("v4")
    if text[op_start:op_end] != ":" or not glued:
        return False
    return text[m.start("key") - 1 : m.start("key")] == "-" and bool(_GLUED_PATH.match(value))


# Sudoers tags that ask for (or waive) a password: "NOPASSWD: /usr/sbin/zpool".
_SUDOERS_COMMAND = re.compile(r"[ \t]*(?:/|ALL\b|!|[A-Z_]+:)")


def _is_sudoers_tag(m: re.Match[str]) -> bool:
    text = m.string
    start = m.start("key")
    if text[start : m.end("key")] != "PASSWD" or text[m.start("op") : m.end("op")] != ":":
        return False
    if m.start("op") != m.end("key"):
        return False
    before = text[max(0, start - 2) : start]
    if before == "NO" or not before or not before[-1].isalnum():
        return bool(_SUDOERS_COMMAND.match(text, m.end("op")))
    return False


def _check_assignment(m: re.Match[str]) -> bool:
    if not _key_is_secret_name(m) or _is_sudoers_tag(m):
        return False
    key = m.group("key").lower()
    value, quoted = _value(m)
    if not quoted and m.group("v4") is not None and _is_label_and_path(m, value):
        return False
    if _is_placeholder(value) or value.startswith("arn:"):
        return False  # an AWS resource name identifies, it does not authenticate
    if key == "pwd" and value[0] in "/~.":
        return False  # a working directory
    if quoted:
        if _TEMPLATE.search(value):
            return False  # 'IDENTIFIED BY "%(password)s"', f"{prefix}-token"
        op_start, op_end = m.span("op")
        if (
            m.string[op_start:op_end] == ":"
            and m.string[op_start - 1 : op_start] == " "
            and (m.string[op_end : op_end + 1] in ("'", '"'))
        ):
            return False  # psql's :'new_password' names a variable
    elif _is_code_value(m, value):
        return False
    if _is_password_key(key):
        return True
    if key in ("token", "auth") or key.startswith("cred"):
        # Vague names (auth modes, token kinds): a short plain word is a setting, anything
        # long or minted-looking is taken for the credential.
        long_word = len(value) >= 12 and any(c.isalpha() for c in value)
        return _looks_minted(value) or (long_word and not any(c.isspace() for c in value))
    # secret / *_key: any single-word value; prose in such a field is text.
    return not any(c.isspace() for c in value)


def _assignment_kind(m: re.Match[str]) -> str:
    return "password_assignment" if _is_password_key(m.group("key")) else "secret_assignment"


# -- command-line flags: --password X, --api-key=X -------------------------------------

_CLI_FLAG = re.compile(
    r"(?P<key>pass(?:word|wd)?|token|secret|key)(?:=|[ \t]+)" + _VALUE,
)
_FLAG_NAME = re.compile(r"(?:^|(?<=[\s\"'=]))--?((?:[a-z0-9]+-)*)$")
_FLAG_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "client", "auth"})


def _check_cli_flag(m: re.Match[str]) -> bool:
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
    if m.string.startswith(_MARKER_PREFIX, m.end()):
        return False  # -pass pass:[REDACTED...]: what is left of a value already redacted
    separated_by_space = m.string[m.end("key")] != "="
    if (
        separated_by_space
        and not quoted
        and value.isalpha()
        and value.islower()
        and len(value) < 12
    ):
        return False  # "use --token with care", "the --password option": prose about flags
    if _is_password_key(key):
        return True
    return quoted or _looks_minted(value) or len(value) >= 12


# -- client programs that take a password inline ---------------------------------------

_CLI_PASSWORD = re.compile(
    r"(?:(?<![\w-])mysql(?:dump|admin)?\b[^\n;|&]{0,300}?[ \t]-p"
    r"|(?<![\w-])sshpass[ \t]+-p[ \t]*"
    r"|(?<![\w-])redis-cli\b[^\n;|&]{0,300}?[ \t]-a[ \t]+"
    r"|(?<![\w-])mysqladmin\b[^\n;|&]{0,300}?[ \t]password[ \t]+"
    r"|(?<![\w-])mongosh\b[^\n;|&]{0,300}?[ \t]-p[ \t]+"
    r"|login(?:(?<=docker login)|(?<=podman login)|(?<=nerdctl login)|(?<=az login))\b"
    r"[^\n;|&]{0,300}?[ \t]-p[ \t]+"
    r"|(?<![\w-])rabbitmqctl[ \t]+(?:add_user|change_password)[ \t]+\S+[ \t]+"
    r"|gh secret set\b[^\n;|&]{0,200}?[ \t](?:--body|-b)(?:[ \t]+|=))"
    r"""(?:'(?P<v3>[^'\n]{1,256})'|"(?P<v1>[^"\n]{1,256})"|(?P<v4>[^\s'"]{1,256}))"""
)


def _check_cli_password(m: re.Match[str]) -> bool:
    return not _is_placeholder(_value(m)[0])


# htpasswd -b[c|n|B...] [FILE] USER PASSWORD: the password is the last argument, the
# third with a file and the second with -n (which prints instead of writing a file).
_HTPASSWD = re.compile(
    r"htpasswd(?P<flags>(?:[ \t]+-[A-Za-z]+)+)[ \t]+(?P<a1>[^\s\-|;&<>][^\s|;&<>]*)"
    r"[ \t]+(?P<a2>[^\s|;&<>]+)(?:[ \t]+(?P<a3>[^\s|;&<>]+))?"
)


def _htpasswd_span(m: re.Match[str]) -> tuple[int, int]:
    return m.span("a2") if "n" in m.group("flags") or m.group("a3") is None else m.span("a3")


def _check_htpasswd(m: re.Match[str]) -> bool:
    if "b" not in m.group("flags"):
        return False  # without -b the password is asked for, not given
    start, end = _htpasswd_span(m)
    return not _is_placeholder(m.string[start:end].strip("'\""))


# openssl's pass:X and keytool's -storepass X / -keypass X
_TOOL_PASS = re.compile(
    r"pass(?:in|out)?(?:(?<=-pass)|(?<=-passin)|(?<=-passout)|(?<=storepass)|(?<=keypass))"
    r"[ \t]+(?:pass:)?" + _VALUE
)

# SQL: CREATE USER app WITH PASSWORD 'x', ALTER ROLE ... PASSWORD 'x', IDENTIFIED BY 'x'
_SQL_PASSWORD = re.compile(
    r"(?:password|identified[ \t]+by)[ \t]+(?:'(?P<v3>[^'\n]{1,256})'|\"(?P<v1>[^\"\n]{1,256})\")",
    re.IGNORECASE,
)


def _check_sql_password(m: re.Match[str]) -> bool:
    value = _value(m)[0]
    return not (_is_placeholder(value) or _TEMPLATE.search(value))


# echo 'user:password' | chpasswd
_CHPASSWD = re.compile(
    r"echo[ \t]+(?:-e[ \t]+)?['\"]?[\w.@-]+:(?P<v4>[^\s'\"|]+)['\"]?[ \t]*\|[ \t]*"
    r"(?:sudo[ \t]+)?chpasswd"
)


_NETRC = re.compile(r"login[ \t]+\S+[ \t]+password[ \t]+(?P<v4>\S+)")

# -- a container's environment: "- name: DB_PASSWORD" then "value: X" --------------------

_NAMED_VALUE = re.compile(
    r"(?P<key>pass(?:word|wd)?|secret|token|key)(?![A-Za-z0-9])[\"']?[ \t]*\r?\n"
    r"[ \t]*(?:-[ \t]*)?value:[ \t]*" + _VALUE,
    re.IGNORECASE,
)
_NAME_LINE = re.compile(r"^[ \t]*(?:-[ \t]*)?name:[ \t]*[\"']?[\w.-]*$")


def _check_named_value(m: re.Match[str]) -> bool:
    text = m.string
    line_start = text.rfind("\n", 0, m.start()) + 1
    if not _NAME_LINE.match(text[line_start : m.start()]):
        return False  # only a name: line followed by its value: line
    key = m.group("key").lower()
    if key == "key" and _qualifier_before(text, m.start("key")) not in _KEY_QUALIFIERS:
        return False
    value = _value(m)[0]
    return not (_is_reference(value) or _looks_like_path(value))


def _looks_like_path(value: str) -> bool:
    return value.startswith(("/", "~", "./"))


# -- prose: "the staging password is X", "Your password `X`" ---------------------------

_PROSE = re.compile(
    r"(?P<key>pass(?:word|wd|phrase|code)|secret|token|key|credentials?)s?"
    r"(?:[ \t]+(?:for|of|on|to|in|at)(?:[ \t]+(?!(?:is|was|are)\b)[\w.@:/-]{1,60}){1,3})?"
    r"(?:[ \t]+(?:is|was|are|has[ \t]+been|->|→)(?:[ \t]*:)?[ \t]+|[ \t]*:[ \t]+"
    r"|[ \t]+(?:to[ \t]+)?)"
    r"(?:now[ \t]+|still[ \t]+|just[ \t]+|set[ \t]+to[ \t]+|changed[ \t]+to[ \t]+)?"
    r"(?:\*\*)?"
    r"(?:`(?P<v5>[^`\n]{1,256})`|\"(?P<v1>[^\"\n]{1,256})\"|'(?P<v3>[^'\n]{1,256})'"
    r"|(?P<v4>[^\s\"'`]{1,256}))",
    re.IGNORECASE,
)
_PROSE_GROUPS = ("v5", "v1", "v3", "v4")
_PROSE_KEY_QUALIFIER = re.compile(r"([A-Za-z]+)[ \t_-]+$")
# What follows "the password is" when no password does.
_PROSE_WORDS = frozenset(
    "the a an not wrong incorrect correct invalid valid required missing empty set stored "
    "in on at to too still now being case same different saved kept sent changed reset "
    "only just also what that this your my our their there here never always generated "
    "rotated shown visible hidden optional mandatory usually weak strong short long good "
    "fine ok okay sensitive updated read checked used given provided passed managed "
    "handled configured defined specified listed available unavailable known unknown one "
    "two from with without for by and or but if as it its is was be been ignored expired "
    "revoked leaked compromised encrypted hashed salted exposed blank null none unset "
    "sent right bad new old default".split()
)
_PROSE_SUFFIXES = ("ed", "ing", "ly", "able", "ible")
_TRAILING_PUNCTUATION = ".,;:!?)]*"


def _prose_value(m: re.Match[str]) -> tuple[str, bool, int, int]:
    """(value, quoted, start, end) of a prose match, trailing punctuation left out."""
    for name in _PROSE_GROUPS:
        if m.group(name) is not None:
            start, end = m.span(name)
            if name != "v4":
                return m.group(name), True, start, end
            value = m.group(name).rstrip(_TRAILING_PUNCTUATION)
            return value, False, start, start + len(value)
    return "", False, m.end(), m.end()


def _prose_span(m: re.Match[str]) -> tuple[int, int]:
    _, _, start, end = _prose_value(m)
    return start, end


_CALL = re.compile(r"[A-Za-z_][\w.]*[(\[]")


def _is_reference(value: str) -> bool:
    """A value that names where a secret lives instead of being one."""
    core = value.rstrip(";")
    return (
        _is_placeholder(core)
        or bool(_DOTTED_NAME.fullmatch(core))
        or bool(_CALL.match(core))
        or core.startswith(("os.environ", "process.env", "ENV[", "env("))
    )


def _check_prose(m: re.Match[str]) -> bool:
    text = m.string
    key = m.group("key").lower()
    start = m.start("key")
    if text[start - 1 : start].isalpha() and key in ("key", "token", "secret"):
        return False  # monkey, broken, ...: only whole words
    if key == "key":
        q = _PROSE_KEY_QUALIFIER.search(text, max(0, start - 24), start)
        if q is None or q.group(1).lower() not in _KEY_QUALIFIERS:
            return False
    if key == "token":
        q = _PROSE_KEY_QUALIFIER.search(text, max(0, start - 24), start)
        if q is not None and q.group(1).lower() in _BENIGN_TOKEN_QUALIFIERS:
            return False
    value, quoted, value_start, _ = _prose_value(m)
    if not value or _is_reference(value) or value.startswith(("http://", "https://", "/", "~")):
        return False
    password_like = key.startswith("pass")
    between = text[m.end("key") : value_start]
    colon = ":" in between and " is" not in between
    if not quoted and between.strip().lower() in ("", "s", "to", "s to"):
        # No verb: "use API key 9f8e...", "set the password to Blu3Fjord!x". Only a value
        # shaped like a credential counts ("Enter your password to continue" is a sentence).
        return _looks_minted(value.rstrip(_TRAILING_PUNCTUATION))
    if colon:
        return _looks_minted(value)  # "Password: hunter2x (rotated)"; the rest is left to
        # the assignment rule, which knows code
    if quoted:
        return password_like or not any(c.isspace() for c in value)
    if len(value) < 4:
        return False
    if value.isdigit():
        return len(value) >= 6
    lowered = value.lower()
    if value.isalpha():
        if lowered in _PROSE_WORDS or lowered.endswith(_PROSE_SUFFIXES):
            return False
        if colon:
            return False  # password: SecretStr, token: Token: a type, left to the assignment rule
        if value.islower() or (value[0].isupper() and value[1:].islower()):
            return password_like and len(value) >= 6  # a word: only a password is one
        return True  # mixed case inside a word
    return True


# "Credentials: ops / hunter2x", "login: admin:hunter2x"
_USER_AND_PASSWORD = re.compile(
    r"(?:credentials?|creds|login)(?:[ \t]+(?:are|is))?[ \t]*:?[ \t]+[\w.@+-]{1,64}"
    r"[ \t]*(?:/|:|,)[ \t]*"
    r"(?P<v4>[^\s\"'`]{4,256})",
    re.IGNORECASE,
)


def _user_and_password_span(m: re.Match[str]) -> tuple[int, int]:
    start = m.start("v4")
    return start, start + len(m.group("v4").rstrip(_TRAILING_PUNCTUATION))


def _check_user_and_password(m: re.Match[str]) -> bool:
    start, end = _user_and_password_span(m)
    value = m.string[start:end]
    if _is_reference(value) or value.startswith(("/", "~", "-")) or "://" in value:
        return False
    return not value.isalpha() or len(value) >= 8


# A secret quoted back in backticks a few words after its name: "Here is the secret you
# asked for: `...`", "the token in your config is `...`".
_QUOTED_AFTER = re.compile(
    r"(?P<key>pass(?:word|wd|phrase|code)|secret|token|key)s?"
    r"(?:[ \t]+[^\s`]{1,40}){0,5}?[ \t]*(?::|[ \t](?:is|was|to|are))?[ \t]*"
    r"`(?P<v5>[^`\n]{1,256})`",
    re.IGNORECASE,
)


def _check_quoted_after(m: re.Match[str]) -> bool:
    text = m.string
    key = m.group("key").lower()
    start = m.start("key")
    if text[start - 1 : start].isalpha():
        return False  # monkey, broken: whole words only
    qualifier = _PROSE_KEY_QUALIFIER.search(text, max(0, start - 24), start)
    before = qualifier.group(1).lower() if qualifier else ""
    if key == "key" and before not in _KEY_QUALIFIERS:
        return False
    if key == "token" and before in _BENIGN_TOKEN_QUALIFIERS:
        return False
    value = m.group("v5")
    if _is_reference(value) or value.startswith(("/", "~", "-", ".")) or "/" in value:
        return False  # a variable, a path or a flag named in backticks
    if key.startswith("pass"):
        return True
    if any(c.isspace() for c in value):
        return False
    return _looks_minted(value) or len(value) >= 12


# -- URLs with credentials -------------------------------------------------------------

_URL_PASSWORD = re.compile(
    r"://(?P<user>[^\s:/?#@\"'<>\[\]\\]{0,256}):(?P<v4>[^\s/\"'<>\\]{1,256})"
    # up to the last '@' before the host: passwords are often pasted unencoded
    r"@(?=[^\s@/\"'<>\\]*(?:[/\s\"'<>\\?#]|$))"
)


def _check_url_password(m: re.Match[str]) -> bool:
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


def _check_auth_header(m: re.Match[str]) -> bool:
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


def _auth_header_kind(m: re.Match[str]) -> str:
    scheme = (m.group("scheme") or "").lower()
    if scheme == "basic":
        return "basic_auth"
    if scheme in ("bearer", "token"):
        return "bearer_token"
    return "authorization_header"


_BEARER = re.compile(r"(?<![A-Za-z])(?:[Bb]earer|BEARER)[ \t]+(?P<v4>[A-Za-z0-9._~+/=-]{16,4096})")


def _check_bearer(m: re.Match[str]) -> bool:
    value = m.group("v4")
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


_CURL_USER = re.compile(
    r"curl\b[^\n]{0,500}?[ \t](?:-u|--user)(?:[ \t]*|=)[\"']?(?P<user>[^\s:\"']+):(?P<v4>[^\s\"']+)"
)


def _check_curl_user(m: re.Match[str]) -> bool:
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


def _check_aws_secret(m: re.Match[str]) -> bool:
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
            r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{30,255})"
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
        _token(r"xox[abposer]-[A-Za-z0-9-]{10,250}(?<!-)"),
    ),
    _Rule(
        "slack_webhook",
        (("ck.com/", len("hooks.sla")),),
        _token(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+-]{16,300}"),
    ),
    _Rule(
        "anthropic_key",
        (("k-", 1),),
        _token(rf"sk-ant-[{_URLSAFE}]{{20,300}}"),
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
        _token(r"npm_[A-Za-z0-9]{36,40}(?![A-Za-z0-9])"),
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
        (
            ("ysql", 1),
            ("pass", len("ssh")),
            ("cli", len("redis-")),
            ("gin", len("lo")),
            ("gosh", len("mon")),
            ("qctl", len("rabbitm")),
            ("cret", len("gh se")),
        ),
        _CLI_PASSWORD,
        cased=False,
        groups=_VALUE_GROUPS,
        check=_check_cli_password,
    ),
    _Rule(
        "cli_password",
        (("pass", len("ht")),),
        _HTPASSWD,
        check=_check_htpasswd,
        span_of=_htpasswd_span,
    ),
    _Rule(
        "cli_password",
        (("pass", 0),),
        _TOOL_PASS,
        groups=_VALUE_GROUPS,
        check=lambda m: not _is_placeholder(_value(m)[0]),
    ),
    _Rule(
        "cli_password",
        (("pass", 0), ("fied", len("identi"))),
        _SQL_PASSWORD,
        cased=False,
        groups=("v3", "v1"),
        check=_check_sql_password,
    ),
    _Rule(
        "cli_password",
        (("cho", 1),),
        _CHPASSWD,
        cased=False,
        groups=("v4",),
        check=lambda m: not _is_placeholder(m.group("v4")),
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
    _Rule(
        "password_prose",
        (("pass", 0), ("cret", 2), ("ken", 2), ("key", 0), ("cred", 0)),
        _PROSE,
        cased=False,
        check=_check_prose,
        span_of=_prose_span,
        kind_of=lambda m: "password" if m.group("key").lower().startswith("pass") else "secret",
    ),
    _Rule(
        "password_prose",
        (("cred", 0), ("gin", 2)),
        _USER_AND_PASSWORD,
        cased=False,
        check=_check_user_and_password,
        span_of=_user_and_password_span,
        kind_of=lambda m: "password",
    ),
    _Rule(
        "password_prose",
        (("pass", 0), ("cret", 2), ("ken", 2), ("key", 0)),
        _QUOTED_AFTER,
        cased=False,
        groups=("v5",),
        check=_check_quoted_after,
        kind_of=lambda m: "password" if m.group("key").lower().startswith("pass") else "secret",
    ),
    _Rule(
        "secret_assignment",
        (("pass", 0), ("cret", 2), ("ken", 2), ("key", 0)),
        _NAMED_VALUE,
        cased=False,
        groups=_VALUE_GROUPS,
        check=_check_named_value,
        kind_of=lambda m: (
            "password_assignment"
            if m.group("key").lower().startswith("pass")
            else "secret_assignment"
        ),
    ),
)
