"""Tests for sessionhub.text.redaction: recall on real formats, no false positives on ordinary
code and text, redact_value on nested payloads, idempotency and speed guards.

Every key below is generated here from a seeded RNG in the shape of the real format;
none is, or ever was, a live credential. No Django and no database are needed.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sessionhub.text import redaction
from sessionhub.text.redaction import RULES_VERSION, contains_secret, redact_text, redact_value
from sessionhub.text.redaction import engine as redaction_engine
from sessionhub.text.redaction import rules as redaction_rules

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SECRETS_JSONL = FIXTURES / "secrets.jsonl"

MARKER = "[REDACTED:"

# ---------------------------------------------------------------------------------------
# Random keys in real formats
# ---------------------------------------------------------------------------------------

_rng = random.Random(20261122)
B62 = string.ascii_letters + string.digits
B64 = B62 + "+/"
URLSAFE = B62 + "-_"
HEX = "0123456789abcdef"
UPPER_ALNUM = string.ascii_uppercase + string.digits


_CLASSES = (str.isdigit, str.isupper, str.islower)


def rand(alphabet: str, n: int) -> str:
    """A random string using every character class of its alphabet, as minted keys do."""
    wanted = [test for test in _CLASSES if any(test(c) for c in alphabet)]
    while True:
        value = "".join(_rng.choice(alphabet) for _ in range(n))
        if n < 6 or all(any(test(c) for c in value) for test in wanted):
            return value


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_jwt() -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(json.dumps({"sub": rand(B62, 12), "iat": 1795288670}).encode())
    return f"{header}.{payload}.{b64url(_rng.randbytes(32))}"


def pem_body(lines: int = 6) -> str:
    return "\n".join(rand(B64, 64) for _ in range(lines))


AKIA = "AKIA" + rand(UPPER_ALNUM, 16)
ASIA = "ASIA" + rand(UPPER_ALNUM, 16)
AWS_SECRET = rand(B64, 40)
GHP = "ghp_" + rand(B62, 36)
GHS = "ghs_" + rand(B62, 36)
GITHUB_PAT = "github_pat_" + rand(B62, 22) + "_" + rand(B62, 59)
GLPAT = "glpat-" + rand(URLSAFE, 20)
XOXP = f"xoxp-{rand(string.digits, 11)}-{rand(string.digits, 12)}-{rand(B62, 24)}"
SLACK_HOOK = (
    "https://hooks.slack.com/services/"
    f"T{rand(UPPER_ALNUM, 8)}/B{rand(UPPER_ALNUM, 8)}/{rand(B62, 24)}"
)
OPENAI_LEGACY = "sk-" + rand(B62, 48)
OPENAI_SVC = "sk-svcacct-" + rand(URLSAFE, 60)
ANTHROPIC_ADMIN = "sk-ant-admin01-" + rand(URLSAFE, 80) + "AA"
STRIPE_TEST = "sk_test_" + rand(B62, 24)
STRIPE_RESTRICTED = "rk_live_" + rand(B62, 24)
STRIPE_WEBHOOK = "whsec_" + rand(B62, 32)
GOOGLE_KEY = "AIza" + rand(URLSAFE, 35)
GOOGLE_OAUTH_SECRET = "GOCSPX-" + rand(URLSAFE, 28)
GOOGLE_ACCESS_TOKEN = "ya29." + rand(URLSAFE, 120)
JWT = make_jwt()
NPM = "npm_" + rand(B62, 36)
PYPI = "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 70)
SENDGRID = f"SG.{rand(URLSAFE, 22)}.{rand(URLSAFE, 43)}"
TWILIO_SID = "SK" + rand(HEX, 32)
TWILIO_TOKEN = rand(HEX, 32)
HF = "hf_" + rand(string.ascii_letters, 34)
DISCORD_BOT = f"M{rand(URLSAFE, 25)}.{rand(URLSAFE, 6)}.{rand(URLSAFE, 38)}"
DISCORD_HOOK = f"https://discord.com/api/webhooks/{rand(string.digits, 18)}/{rand(URLSAFE, 68)}"
HEROKU_NEW = "HRKU-AA" + rand(URLSAFE, 58)
HEROKU_UUID = "4f6b2c1e-9a7d-4e3b-8c5f-" + rand(HEX, 12)
AZURE_ACCOUNT_KEY = rand(B64, 86) + "=="
AZURE_CLIENT_SECRET = rand(B62, 3) + "8Q~" + rand(B62 + "_~.-", 34)
AZURE_SIG = rand(B62, 43) + "%3D"
BASIC = base64.b64encode(b"deploy:" + rand(B62, 16).encode()).decode()
OPAQUE_BEARER = rand(B62 + "-._~", 40)
PASSWORDS = [rand(B62 + "!#%^*", 14) for _ in range(20)]
DJANGO_SECRET = "django-insecure-" + rand(B62 + "!@#%^&*(-_=+)", 50)

# (text, secrets that must disappear, strings that must stay)
RECALL: list[tuple[str, list[str], list[str]]] = [
    (f'aws_access_key_id = {AKIA}\naws_secret_access_key = "{AWS_SECRET}"', [AKIA, AWS_SECRET], []),
    (f"aws configure set aws_secret_access_key {AWS_SECRET}", [AWS_SECRET], ["aws configure set"]),
    (
        json.dumps({"Credentials": {"AccessKeyId": ASIA, "SecretAccessKey": AWS_SECRET}}),
        [ASIA, AWS_SECRET],
        ["Credentials", "AccessKeyId"],
    ),
    (f"git clone https://x-access-token:{GHS}@github.com/acme/api.git", [GHS], ["github.com/acme"]),
    (f"gh auth login --with-token <<< {GHP}", [GHP], ["gh auth login"]),
    (
        f"curl -H 'Authorization: token {GHP}' https://api.github.com/user",
        [GHP],
        ["api.github.com"],
    ),
    (f"GITHUB_TOKEN={GITHUB_PAT}", [GITHUB_PAT], ["GITHUB_TOKEN="]),
    (f"export GITLAB_TOKEN={GLPAT}", [GLPAT], ["export GITLAB_TOKEN="]),
    (f"SLACK_TOKEN='{XOXP}'", [XOXP], []),
    (f"post to {SLACK_HOOK} when done", [SLACK_HOOK.rsplit("/", 1)[1]], ["when done"]),
    (f"openai.api_key = '{OPENAI_LEGACY}'", [OPENAI_LEGACY], ["openai.api_key"]),
    (f"OPENAI_API_KEY={OPENAI_SVC} python run.py", [OPENAI_SVC], ["python run.py"]),
    (f'{{"x-api-key": "{ANTHROPIC_ADMIN}"}}', [ANTHROPIC_ADMIN], ["x-api-key"]),
    (f"stripe listen --api-key {STRIPE_TEST}", [STRIPE_TEST], ["stripe listen"]),
    (
        f"STRIPE_KEY={STRIPE_RESTRICTED}\nSTRIPE_WEBHOOK_SECRET={STRIPE_WEBHOOK}",
        [STRIPE_RESTRICTED, STRIPE_WEBHOOK],
        [],
    ),
    (
        f'<script src="https://maps.googleapis.com/maps/api/js?key={GOOGLE_KEY}"></script>',
        [GOOGLE_KEY],
        ["maps.googleapis.com"],
    ),
    (
        json.dumps(
            {"client_id": "1.apps.googleusercontent.com", "client_secret": GOOGLE_OAUTH_SECRET}
        ),
        [GOOGLE_OAUTH_SECRET],
        ["client_id"],
    ),
    (f"gcloud says: access token {GOOGLE_ACCESS_TOKEN}", [GOOGLE_ACCESS_TOKEN], ["gcloud says"]),
    (f"Set-Cookie: session={JWT}; HttpOnly", [JWT], ["HttpOnly"]),
    (f"id_token: {JWT}", [JWT], []),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + pem_body()
        + "\n-----END OPENSSH PRIVATE KEY-----",
        [],  # checked below: nothing of the body survives
        [],
    ),
    (
        "-----BEGIN EC PRIVATE KEY-----\n" + pem_body(3) + "\n-----END EC PRIVATE KEY-----\nnext",
        [],
        ["next"],
    ),
    (
        # a GCP service-account file as raw JSON text: newlines are escaped
        '{"type": "service_account", "private_key_id": "'
        + rand(HEX, 40)
        + '", "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + "\\n".join(rand(B64, 64) for _ in range(4))
        + '\\n-----END PRIVATE KEY-----\\n", "client_email": "svc@proj.iam.gserviceaccount.com"}',
        [],
        ["client_email", "service_account"],
    ),
    (
        "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n"
        + pem_body(4)
        + "\n-----END PGP PRIVATE KEY BLOCK-----",
        [],
        [],
    ),
    (
        # cut off before its END line, as a truncated tool output would be
        "cat id_rsa\n-----BEGIN RSA PRIVATE KEY-----\n" + pem_body(3),
        [],
        ["cat id_rsa"],
    ),
    (
        f"mongodb+srv://admin:{PASSWORDS[0]}@cluster0.example.mongodb.net/db",
        [PASSWORDS[0]],
        ["cluster0.example.mongodb.net/db"],
    ),
    (f"redis://:{PASSWORDS[1]}@cache:6379/0", [PASSWORDS[1]], ["cache:6379/0"]),
    (f"amqp://guest:p@ss{PASSWORDS[2]}@rabbit:5672//", [PASSWORDS[2], "p@ss"], ["rabbit:5672"]),
    (
        f'DATABASES_URL="mysql://root:{PASSWORDS[3]}@127.0.0.1:3306/app"',
        [PASSWORDS[3]],
        ["127.0.0.1:3306/app"],
    ),
    (f'PASSWORD="{PASSWORDS[4]}"', [PASSWORDS[4]], []),
    (
        f"db:\n  user: app\n  password: {PASSWORDS[5]}\n  host: db",
        [PASSWORDS[5]],
        ["user: app", "host: db"],
    ),
    (f"PGPASSWORD={PASSWORDS[6]} psql -h db -U app", [PASSWORDS[6]], ["psql -h db -U app"]),
    (f"export DB_PASSWORD='{PASSWORDS[7]}'", [PASSWORDS[7]], ["export DB_PASSWORD="]),
    (f"mysql -uroot -p{PASSWORDS[8]} app < dump.sql", [PASSWORDS[8]], ["app < dump.sql"]),
    (f"mysqldump -u root -p'{PASSWORDS[9]}' --all-databases", [PASSWORDS[9]], ["--all-databases"]),
    (f"sshpass -p '{PASSWORDS[10]}' ssh deploy@web1", [PASSWORDS[10]], ["ssh deploy@web1"]),
    (f"redis-cli -h cache -a {PASSWORDS[11]} ping", [PASSWORDS[11]], ["ping"]),
    (
        f"docker login -u ci -p {PASSWORDS[12]} registry.example.com",
        [PASSWORDS[12]],
        ["registry.example.com"],
    ),
    (
        f"machine api.example.com login deploy password {PASSWORDS[13]}",
        [PASSWORDS[13]],
        ["machine api.example.com"],
    ),
    (f"Server=db;Database=app;User Id=sa;Pwd={PASSWORDS[14]};", [PASSWORDS[14]], ["Database=app"]),
    (f"pg_dump --password {PASSWORDS[15]} app", [PASSWORDS[15]], ["pg_dump", "app"]),
    (f"{{'username': 'admin', 'password': '{PASSWORDS[16]}'}}", [PASSWORDS[16]], ["username"]),
    (
        f'curl -d "user=me&password={PASSWORDS[17]}&remember=1" https://x.test/login',
        [PASSWORDS[17]],
        ["remember=1"],
    ),
    (f"DB_PASS={PASSWORDS[18]}", [PASSWORDS[18]], []),
    (f"ssh-keygen -N '' ; passphrase: {PASSWORDS[19]}", [PASSWORDS[19]], ["ssh-keygen"]),
    (f"SECRET_KEY = '{DJANGO_SECRET}'", [DJANGO_SECRET], ["SECRET_KEY = "]),
    (f"export WEBHOOK_SECRET={rand(HEX, 40)}", [], ["export WEBHOOK_SECRET="]),
    (f'const client = new Client({{ apiKey: "{rand(B62, 32)}" }});', [], ["new Client"]),
    (f"X-API-Key: {rand(B62, 32)}", [], ["X-API-Key"]),
    (
        f"TWILIO_AUTH_TOKEN={TWILIO_TOKEN}\nTWILIO_API_KEY={TWILIO_SID}",
        [TWILIO_TOKEN, TWILIO_SID],
        [],
    ),
    (f"//registry.npmjs.org/:_authToken={NPM}", [NPM], ["registry.npmjs.org"]),
    (f"twine upload -u __token__ -p {PYPI} dist/*", [PYPI], ["dist/*"]),
    (f"sg = SendGridAPIClient('{SENDGRID}')", [SENDGRID], ["SendGridAPIClient"]),
    (f"huggingface-cli login --token {HF}", [HF], ["huggingface-cli login"]),
    (f"from huggingface_hub import login; login('{HF}')", [HF], ["huggingface_hub"]),
    (f"DISCORD_BOT_TOKEN={DISCORD_BOT}", [DISCORD_BOT], []),
    (f"import discord\nclient.run('{DISCORD_BOT}')", [DISCORD_BOT], ["import discord"]),
    (f"-H 'Authorization: Bot {DISCORD_BOT}'", [DISCORD_BOT], []),
    (f"notify {DISCORD_HOOK}", [DISCORD_HOOK.rsplit("/", 1)[1]], ["notify"]),
    (f"HEROKU_API_KEY={HEROKU_UUID}", [HEROKU_UUID], []),
    (f"heroku auth:token -> {HEROKU_NEW}", [HEROKU_NEW], []),
    (
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={AZURE_ACCOUNT_KEY};EndpointSuffix=core.windows.net",
        [AZURE_ACCOUNT_KEY[:80]],
        ["AccountName=acme", "EndpointSuffix=core.windows.net"],
    ),
    (f"AZURE_CLIENT_SECRET={AZURE_CLIENT_SECRET}", [AZURE_CLIENT_SECRET], []),
    (f"client secret value: {AZURE_CLIENT_SECRET}", [AZURE_CLIENT_SECRET], []),
    (
        f"https://acme.blob.core.windows.net/c/f.txt?sv=2022-11-02&se=2026-01-01&sp=r&sig={AZURE_SIG}",
        [AZURE_SIG],
        ["acme.blob.core.windows.net"],
    ),
    (f"Authorization: Basic {BASIC}", [BASIC], []),
    (f'headers = {{"Authorization": "Bearer {OPAQUE_BEARER}"}}', [OPAQUE_BEARER], ["headers"]),
    (f"Proxy-Authorization: Basic {BASIC}", [BASIC], ["Proxy-"]),
    (f"curl -u admin:{PASSWORDS[0]} https://jenkins.local/api", [PASSWORDS[0]], ["jenkins.local"]),
    (f"the header was Bearer {OPAQUE_BEARER}", [OPAQUE_BEARER], ["the header was"]),
    (
        # A whole event stored as a JSON string inside another JSON document.
        json.dumps({"command": f'echo "{{\\"password\\": \\"{PASSWORDS[1]}\\"}}" > cfg.json'}),
        [PASSWORDS[1]],
        ["cfg.json"],
    ),
    (
        json.dumps({"tool_input": {"command": f'export API_KEY="{rand(B62, 30)}"'}}),
        [],
        ["tool_input"],
    ),
]

PRIVATE_KEY_CASES = [text for text, _s, _k in RECALL if "PRIVATE KEY" in text]

FALSE_POSITIVES = [
    "git checkout 3f9c2d8e1b7a6c5d4e3f2a1b0c9d8e7f6a5b4c3d && git log -1",
    "commit a3a907dc68128e6bd6eda60d92efecc2797ed697\nAuthor: Dana <dana@example.com>",
    "session 53f69e7d-cb8e-e790-99c1-1e96bebe2c76 ended after 42 turns",
    '{"session_id": "1959b9ef-58d0-4674-b34d-e73d60c290d0", "cwd": "/home/dev/src/web"}',
    "sha256: 237ad919b2304c3ed152e7f6ea0076279a53586751b14605fa85a3019c8c5df1  dist/app.tar.gz",
    "sha512 cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce47d0d13c5d85f2b0ff83"
    "18d2877eec2f63b931bd47417a81a538327af927da3e",
    "integrity: sha512-Q2xhc3NpYyBwYWNrYWdlIGNoZWNrc3VtIGV4YW1wbGUgc3RyaW5n",
    "Read /home/dev/src/ttkeukzonffsvyfpltwlgykhplbhpw/models.py",
    "/usr/lib/python3.11/site-packages/tokenizers/__init__.py",
    "C:\\Users\\dev\\AppData\\Local\\secrets\\keyring.db",
    "Please reset your password from the account settings page.",
    "Passwords must be at least 12 characters long.",
    "Password: must contain a digit and a symbol",
    "**Password:** ask the on-call engineer",
    "Password: ********",
    "def get_token_count(messages): return sum(len(m) for m in messages)",
    "token = request.headers.get('Authorization')",
    'token = request.headers.get("Authorization", "").removeprefix("Bearer ")',
    "password = form.cleaned_data['password']",
    "self.password = make_password(raw_password)",
    "api_key = os.environ['OPENAI_API_KEY']",
    "secret = settings.SECRET_KEY",
    "SECRET_KEY = env('DJANGO_SECRET_KEY')",
    "const token = localStorage.getItem('token');",
    "headers = {'Authorization': f'Bearer {token}'}",
    "client = Client(api_key=api_key, timeout=30)",
    "def login(username: str, password: str) -> bool:",
    "password: Optional[str] = None",
    "token: str = ''",
    "if not password: return None",
    "const { password } = req.body;",
    "password: yup.string().required()",
    "UPDATE users SET password = %s WHERE id = %s",
    "SELECT id FROM api_tokens WHERE token = $1",
    "UPDATE users SET password = :password WHERE id = :id",
    "SELECT id, password_hash FROM users WHERE email = ?",
    "password_reset_timeout_days = 3",
    "PASSWORD_HASHERS = ['django.contrib.auth.hashers.Argon2PasswordHasher']",
    "AUTH_USER_MODEL = 'accounts.User'",
    "auth: required",
    "auth_method=oauth2",
    "credentials: 'include'",
    "credentials: include",
    "secrets: inherit",
    "git log --author=jane --since=yesterday",
    "token_type: Bearer",
    '{"access_token_expires_in": 3600, "token_type": "bearer"}',
    "Bearer tokens are described in RFC 6750.",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "Authorization header missing or malformed",
    '{"usage": {"input_tokens": 2822, "output_tokens": 116}, "max_tokens": 4096}',
    "keyboard shortcuts: press key K to open",
    "items.sort(key=lambda item: item[1])",
    "cache_key = f'user:{user_id}:profile'",
    "primary_key=True, foreign_key: user_id",
    "sessionKey: research:discord:channel:186680755676631875",
    '{"sessionKey": "main:discord:channel:574012067209202916", "channelId": "discord"}',
    "api_key_header = APIKeyHeader(name='X-API-Key')",
    "5 passed, 1 skipped in 0.12s",
    "compass: north-east",
    "bypass_cache=True",
    "PWD=/home/dev/src/web-frontend",
    "OLDPWD=/tmp",
    "export PATH=$HOME/bin:$PATH",
    "echo $SECRET_KEY | wc -c",
    "mysql -u root -p",
    "mysql -u root -p app",
    "mkdir -p /tmp/build && cd /tmp/build",
    "docker login registry.example.com",
    "Use the login page, then open settings.",
    "https://example.com/path?q=1&page=2",
    "http://localhost:8000/api/v1/sessions/",
    "git@github.com:acme/api.git",
    "postgres://db.internal:5432/app",
    "https://user@example.com/repo.git",
    "http://host:8080/page?email=a@b.com",
    "ssh -i ~/.ssh/id_ed25519 deploy@10.0.0.5",
    "pip install scikit-learn pypi-simple",
    "npm install --save-dev @types/node",
    "tokens start with ghp_ and are 40 characters long",
    "task-runner-for-a-very-long-kebab-case-identifier-name",
    "class AbstractSingletonProxyFactoryBeanConfigurationManager:",
    "SecretManagerServiceClient TokenRefreshHandler PasswordResetTokenGenerator",
    "color: #ff00aa; background: #123456; border-color: #ABCDEF;",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    "echo aGVsbG8gd29ybGQ= | base64 -d",
    "The secret to good code is deleting it.",
    "The Key Vault stores certificates; see docs.",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----",
    "request_id=4f1c2b3a-9d8e-4f7a-b6c5-d4e3f2a1b0c9 status=200",
    "The user wants: Investigate slow query on the orders dashboard.",
    "SELECT * FROM orders WHERE customer_id = 42 AND created_at > now() - interval '1 day'",
    "for (let i = 0; i < tokens.length; i++) { out.push(tokens[i]); }",
    # Found by running the engine over Django, the standard library and node_modules:
    "test_pass = await test_func(auser)",
    "userid = passwd = acct = ''",
    "usable_password = value and not value.startswith(UNUSABLE_PASSWORD_PREFIX)",
    "set_password = 'ALTER USER %(user)s IDENTIFIED BY \"%(password)s\"'",
    'password = f"{registry_id}-auth-token"',
    "PASS = 20",
    "'HAVE_STRUCT_PASSWD_PW_PASSWD': 1,",
    'FORCE_CHANGE_PASSWORD = "FORCE_CHANGE_PASSWORD"',
    "if token == self.reset_url_token:",
    "elif cmd == 'pinauth' and secret == self.secret:",
    "SERVER_AUTH = '1.3.6.1.5.5.7.3.1'",
    "self._master_user_password = val",
    '"passwd:gecos",',
    "arn:aws:secretsmanager:us-west-2:123456789012:secret:testsecret-xxxxxx",
    '"IAMUserChangePassword": "arn:aws:iam::aws:policy/IAMUserChangePassword",',
    '"AWS::Config::AggregationAuthorization": "af318b77aaceeeaa",',
    '"AWS::ApiGateway::ApiKey": "48205d4ffd7feba3",',
    '"AWS::SecretsManager::Secret": "c85175a4ebcce361",',
    "authorization = base64.decodebytes(authorization)",
    'Authorization: Digest username="bob", response="6629fae49393a05397450978507c4ef1"',
    "privateKey: NonSharedBuffer;",
    "readonly STENCIL_BACK_PASS_DEPTH_PASS: 0x8803;",
    "onresumptiontoken: options2?.onresumptiontoken",
    "const exclamationToken = !questionToken && !scanner.hasPrecedingLineBreak();",
    "dollarToken = +dollarToken;",
    "offendingToken:Token=None, ctx:ParserRuleContext=None):",
    '"NextToken": "CpHNsscimcV5oH7bSbub03CI2Qms5+ypNpNm+53MNlR0YcXAkp0xFlfKf91yVxSExm",',
    '"ClientRequestToken": "a8ca07e4-61ec-4399-99f4-19853801bcd5",',
    '"output_token": "LastEvaluatedBackupArn",',
    'DEFAULT_REMOTE_ACCESS = {"ec2SshKey": "eksKeypair"}',
    "information can be provided via the --username and --password options",
    "when your file has '-----BEGIN RSA PRIVATE KEY-----' and",
    "e.g. `pass` in `https://user:pass@host:port/path?query#fragment`",
]


def assert_redacted(text: str, secrets: list[str], keep: list[str]) -> str:
    out = redact_text(text)
    for secret in secrets:
        assert secret not in out, f"{secret!r} survived in {out!r}"
    for kept in keep:
        assert kept in out, f"{kept!r} was lost from {out!r}"
    assert MARKER in out
    return out


# ---------------------------------------------------------------------------------------
# Recall
# ---------------------------------------------------------------------------------------


def load_fixture_cases() -> list[dict]:
    lines = SECRETS_JSONL.read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def test_fixture_corpus_secrets_gone_and_keeps_kept() -> None:
    cases = load_fixture_cases()
    assert len(cases) >= 63
    failures = []
    for case in cases:
        # Identifier rows are what ids, paths and JSON keys hold: redacted as those are.
        redact = redaction.redact_identifier if "identifier" in case["kind"] else redact_text
        out = redact(case["text"])
        failures += [("survived", s, out) for s in case["secrets"] if s in out]
        failures += [("lost", k, out) for k in case["keep"] if k not in out]
        if case["secrets"] and MARKER not in out:
            failures.append(("no marker", case["text"], out))
        if not case["secrets"] and out != case["text"]:
            failures.append(("changed", case["text"], out))
    assert not failures


def test_fixture_corpus_types_are_specific() -> None:
    by_prefix = {
        "[deploy]\naws_access_key_id": ["[REDACTED:aws_access_key]", "[REDACTED:aws_secret_key]"],
        "AWS_ACCESS_KEY_ID=ASIA": ["[REDACTED:aws_access_key]"],
        "//npm.pkg.github.com": ["[REDACTED:github_token]"],
        "gh auth login": ["[REDACTED:github_token]"],
        '{"token": "ghs_': ["[REDACTED:github_token]"],
        "SLACK_USER_TOKEN=xoxp": ["[REDACTED:slack_token]"],
        "client = WebClient": ["[REDACTED:slack_token]"],
        "openai.api_key": ["[REDACTED:openai_key]"],
        "OPENAI_API_KEY: sk-proj-": ["[REDACTED:openai_key]"],
        "curl https://api.anthropic.com": ["[REDACTED:anthropic_key]"],
        "Stripe.api_key": ["[REDACTED:stripe_key]"],
        "STRIPE_RESTRICTED_KEY": ["[REDACTED:stripe_key]"],
        "fetch(`https://www.googleapis.com": ["[REDACTED:google_api_key]"],
        '{"id_token": "eyJ': ["[REDACTED:jwt]"],
        "Paste this into the deploy key field": ["[REDACTED:private_key]"],
        "REDIS_URL=redis://": ["redis://:[REDACTED:url_password]@cache.internal"],
        "celery -A billing": ["amqp://worker:[REDACTED:url_password]@mq.internal"],
        "mongodb+srv://": ["svc-report:[REDACTED:url_password]@cluster0"],
        "DB_PASSWORD=": ["[REDACTED:password_assignment]"],
        '{"smtp"': ["[REDACTED:password_assignment]"],
        "database:\n": ["password: [REDACTED:password_assignment]"],
        "PGPASSWORD=": ["[REDACTED:password_assignment]"],
        "mysqldump": ["-p[REDACTED:cli_password]"],
        "sshpass": ["[REDACTED:cli_password]"],
        "redis-cli": ["-a [REDACTED:cli_password]"],
    }
    seen = set()
    for case in load_fixture_cases():
        if case["kind"] != "format":
            continue  # the rows typed with their context are checked by kind below
        for prefix, expected in by_prefix.items():
            if case["text"].startswith(prefix):
                seen.add(prefix)
                out = redact_text(case["text"])
                for marker in expected:
                    assert marker in out, (case["text"], out)
    assert seen == set(by_prefix)


@pytest.mark.parametrize(("text", "secrets", "keep"), RECALL, ids=range(len(RECALL)))
def test_recall_corpus(text: str, secrets: list[str], keep: list[str]) -> None:
    assert_redacted(text, secrets, keep)
    assert contains_secret(text)


@pytest.mark.parametrize("text", PRIVATE_KEY_CASES, ids=range(len(PRIVATE_KEY_CASES)))
def test_private_key_bodies_vanish_entirely(text: str) -> None:
    out = redact_text(text)
    assert "[REDACTED:private_key]" in out
    body_lines = [
        line
        for chunk in text.replace("\\n", "\n").splitlines()
        for line in [chunk.strip()]
        if len(line) >= 40 and "-----" not in line and '"' not in line
    ]
    assert body_lines
    for line in body_lines:
        assert line not in out


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"key={AKIA}", "[REDACTED:aws_access_key]"),
        (f"echo {GHP}", "[REDACTED:github_token]"),
        (f"echo {GLPAT}", "[REDACTED:gitlab_token]"),
        (f"echo {XOXP}", "[REDACTED:slack_token]"),
        (f"see {SLACK_HOOK}", "[REDACTED:slack_webhook]"),
        (f"echo {OPENAI_LEGACY}", "[REDACTED:openai_key]"),
        (f"echo {ANTHROPIC_ADMIN}", "[REDACTED:anthropic_key]"),
        (f"echo {STRIPE_TEST}", "[REDACTED:stripe_key]"),
        (f"echo {GOOGLE_KEY}", "[REDACTED:google_api_key]"),
        (f"echo {GOOGLE_OAUTH_SECRET}", "[REDACTED:google_oauth_secret]"),
        (f"echo {GOOGLE_ACCESS_TOKEN}", "[REDACTED:google_oauth_token]"),
        (f"echo {JWT}", "[REDACTED:jwt]"),
        (f"echo {NPM}", "[REDACTED:npm_token]"),
        (f"echo {PYPI}", "[REDACTED:pypi_token]"),
        (f"echo {SENDGRID}", "[REDACTED:sendgrid_key]"),
        (f"echo {TWILIO_SID}", "[REDACTED:twilio_key]"),
        (f"echo {HF}", "[REDACTED:huggingface_token]"),
        (f"discord bot: {DISCORD_BOT}", "[REDACTED:discord_token]"),
        (f"see {DISCORD_HOOK}", "[REDACTED:discord_webhook]"),
        (f"echo {HEROKU_NEW}", "[REDACTED:heroku_key]"),
        (f"AccountKey={AZURE_ACCOUNT_KEY}", "[REDACTED:azure_storage_key]"),
        (f"echo {AZURE_CLIENT_SECRET}", "[REDACTED:azure_client_secret]"),
        (f"https://a.blob.core.windows.net/x?sig={AZURE_SIG}", "[REDACTED:azure_sas_token]"),
        ("https://bob:hunter2x@example.com", "https://bob:[REDACTED:url_password]@example.com"),
        (f"Authorization: Bearer {OPAQUE_BEARER}", "Authorization: Bearer [REDACTED:bearer_token]"),
        (f"Authorization: Basic {BASIC}", "Authorization: Basic [REDACTED:basic_auth]"),
        ("curl -u admin:hunter2x https://x", "curl -u admin:[REDACTED:basic_auth] https://x"),
        ("mysql -uroot -phunter2x", "mysql -uroot -p[REDACTED:cli_password]"),
        ("machine h login u password hunter2x", "password [REDACTED:netrc_password]"),
        ("password=hunter2x", "password=[REDACTED:password_assignment]"),
        ("export FOO_SECRET=abc123xyz", "export FOO_SECRET=[REDACTED:secret_assignment]"),
        (f"AWS_SECRET_ACCESS_KEY={AWS_SECRET}", "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]"),
    ],
)
def test_type_names(text: str, expected: str) -> None:
    assert expected in redact_text(text)


def test_url_password_keeps_user_and_host() -> None:
    out = redact_text("postgres://app:s3cr3t-pw@db.internal:5432/app?sslmode=require")
    assert out == "postgres://app:[REDACTED:url_password]@db.internal:5432/app?sslmode=require"


def test_several_secrets_in_one_string() -> None:
    text = f"{AKIA} then {GHP} then password={PASSWORDS[0]} then {JWT}"
    out = redact_text(text)
    for secret in (AKIA, GHP, PASSWORDS[0], JWT):
        assert secret not in out
    assert out.count(MARKER) == 4
    assert out.startswith("[REDACTED:aws_access_key] then ")


def test_secret_deep_inside_long_text() -> None:
    filler = "ordinary log line with nothing to hide, path /srv/app/main.py:42\n" * 2000
    text = filler + f"export GITHUB_TOKEN={GHP}\n" + filler
    out = redact_text(text)
    assert GHP not in out
    assert len(out) == len(text) - len(GHP) + len("[REDACTED:github_token]")


# ---------------------------------------------------------------------------------------
# False positives
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", FALSE_POSITIVES, ids=range(len(FALSE_POSITIVES)))
def test_false_positive_corpus_unchanged(text: str) -> None:
    assert redact_text(text) == text
    assert not contains_secret(text)


def test_gateway_fixtures_without_secrets_unchanged() -> None:
    """Every string of every scenario except the one with a planted key stays as is."""
    checked = 0
    for path in sorted(FIXTURES.rglob("*.jsonl")):
        if path.name == "secrets.jsonl" or "secrets" in path.parts:
            continue
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            event = json.loads(line)
            assert redact_value(event) == event, path
            assert redact_text(line) == line, path
            checked += 1
    assert checked > 50


def test_planted_key_in_claude_code_scenario() -> None:
    lines = (FIXTURES / "claude-code" / "secrets" / "hooks.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.strip()]
    redacted = redact_value(events)
    dumped = json.dumps(redacted)
    assert "AKIA" not in dumped
    assert "[REDACTED:aws_access_key]" in dumped
    # Everything else is identical.
    assert json.dumps(events).count('"') == dumped.count('"')


# ---------------------------------------------------------------------------------------
# redact_value
# ---------------------------------------------------------------------------------------


def test_redact_value_nested_structure() -> None:
    payload = {
        "session_id": "1959b9ef-58d0-4674-b34d-e73d60c290d0",
        "tool_input": {
            "command": f"GH_TOKEN={GHP} gh pr list",
            "env": {"DB_PASSWORD": "plain-words here", "HOME": "/home/dev"},
        },
        "headers": [{"Authorization": f"Bearer {OPAQUE_BEARER}"}, {"Accept": "text/html"}],
        "apiKey": "abc",
        "client_secret": "s",
        "token": "",
        "password": None,
        "count": 3,
        "ratio": 0.5,
        "ok": True,
        "list": [1, "two", [f"x {AKIA}"], {"privateKey": "zzz"}],
        "pwd": "/home/dev/src",
        "tokenCount": 15100,
        "token_type": "bearer",
        "sessionKey": "main:discord:channel:574012067209202916",
    }
    original = json.loads(json.dumps(payload))
    out = redact_value(payload)
    assert payload == original  # the input is not modified
    assert list(out) == list(payload)  # keys kept, in order
    assert out["session_id"] == payload["session_id"]
    assert out["tool_input"]["command"] == "GH_TOKEN=[REDACTED:github_token] gh pr list"
    assert out["tool_input"]["env"] == {"DB_PASSWORD": "[REDACTED:password]", "HOME": "/home/dev"}
    assert out["headers"] == [
        {"Authorization": "[REDACTED:authorization]"},
        {"Accept": "text/html"},
    ]
    assert out["apiKey"] == "[REDACTED:api_key]"
    assert out["client_secret"] == "[REDACTED:secret]"
    assert out["token"] == ""  # nothing to hide in an empty string
    assert out["password"] is None
    assert (out["count"], out["ratio"], out["ok"]) == (3, 0.5, True)
    assert out["list"] == [
        1,
        "two",
        ["x [REDACTED:aws_access_key]"],
        {"privateKey": "[REDACTED:private_key]"},
    ]
    assert out["pwd"] == "/home/dev/src"
    assert out["tokenCount"] == 15100
    assert out["token_type"] == "bearer"
    assert out["sessionKey"] == payload["sessionKey"]
    assert redact_value(out) == out


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        ("password", "password"),
        ("PASSWORD", "password"),
        ("db_password", "password"),
        ("passwd", "password"),
        ("DB_PASS", "password"),
        ("db_pwd", "password"),
        ("secret", "secret"),
        ("clientSecret", "secret"),
        ("access_token", "token"),
        ("X-Auth-Token", "token"),
        ("api_key", "api_key"),
        ("apikey", "api_key"),
        ("x-api-key", "api_key"),
        ("AWS_SECRET_ACCESS_KEY", "access_key"),
        ("private_key", "private_key"),
        ("Authorization", "authorization"),
        ("auth", "authorization"),
        ("credentials", "credentials"),
        ("Cookie", "cookie"),
    ],
)
def test_redact_value_secret_named_keys(key: str, kind: str) -> None:
    assert redact_value({key: "v4lue"}) == {key: f"[REDACTED:{kind}]"}
    assert redact_value([{key: 7}]) == [{key: 7}]  # non-strings are left alone


@pytest.mark.parametrize(
    "key",
    [
        "pwd",
        "tokens",
        "token_count",
        "tokenizer",
        "author",
        "keys",
        "key",
        "sessionKey",
        "monkey",
        "secret_name",
        "password_policy_url",
        "passed",
        "OLDPWD",
        "signature",
    ],
)
def test_redact_value_ordinary_keys_untouched(key: str) -> None:
    assert redact_value({key: "plain value"}) == {key: "plain value"}


def test_redact_value_scalars_and_strings() -> None:
    for scalar in (None, True, False, 0, -3, 2.5):
        assert redact_value(scalar) is scalar
    assert redact_value(f"x {GHP}") == "x [REDACTED:github_token]"
    assert redact_value(("a", GHP)) == ["a", "[REDACTED:github_token]"]


def test_redact_value_keeps_existing_markers_under_secret_keys() -> None:
    value = {"token": "[REDACTED:github_token]", "password": "[REDACTED:password]"}
    assert redact_value(value) == value


def test_redact_value_deep_nesting_without_recursion_error() -> None:
    depth = 5000
    value: object = {"password": "hunter2", "leaf": f"key {GHP}"}
    for _ in range(depth):
        value = [{"child": value}]
    out = redact_value(value)
    for _ in range(depth):
        assert isinstance(out, list) and len(out) == 1
        out = out[0]["child"]
    assert out == {"password": "[REDACTED:password]", "leaf": "key [REDACTED:github_token]"}


# ---------------------------------------------------------------------------------------
# Idempotency and markers
# ---------------------------------------------------------------------------------------

ALL_TEXTS = [text for text, _s, _k in RECALL] + FALSE_POSITIVES


@pytest.mark.parametrize("text", ALL_TEXTS, ids=range(len(ALL_TEXTS)))
def test_redacting_twice_equals_once(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once
    assert not contains_secret(once)


@pytest.mark.parametrize(
    "text",
    [
        "[REDACTED:github_token]",
        "token: [REDACTED:github_token]",
        "password=[REDACTED:password_assignment]",
        '{"api_key": "[REDACTED:api_key]"}',
        "postgres://app:[REDACTED:url_password]@db:5432/app",
        "Authorization: Bearer [REDACTED:jwt]",
        "mysql -uroot -p[REDACTED:cli_password] app",
        "[REDACTED:aws_secret_key] [REDACTED:secret_assignment] [REDACTED:private_key]",
        "export FOO_SECRET=[REDACTED:secret_assignment]",
        "curl -u admin:[REDACTED:basic_auth] https://x",
    ],
)
def test_markers_are_never_re_redacted(text: str) -> None:
    assert redact_text(text) == text
    assert not contains_secret(text)


@pytest.mark.parametrize(
    "text",
    [
        'NOPASSWORD = "no-password-required"',
        'PASSWORD = "password"',
        'WaitForTaskToken = "waitForTaskToken"',
        "password=hunter2secretpw",
        "PGPASSWORD=supersecret psql -h db",
        "api_key=myapikey2024",
        "token: abcdefghijklmnop",
        "export POSTGRES_PASSWORD=claude_auth_pass",
    ],
)
def test_a_value_that_names_a_secret_is_no_escape(text: str) -> None:
    # A literal that spells a field's name costs little to redact; one that happens to
    # hold "secret" or "auth" may well be the password itself (issue 33).
    assert MARKER in redact_text(text)


def test_sudoers_tags_are_kept() -> None:
    for text in (
        "deploy ALL=(root) NOPASSWD: /usr/sbin/zpool",
        "%admin ALL=(ALL) NOPASSWD: ALL",
        "ops ALL=(ALL) PASSWD: /usr/bin/systemctl restart nginx",
        "backup ALL=(ALL) NOPASSWD:SETENV: /usr/bin/rsync",
    ):
        assert redact_text(text) == text


def test_redaction_repeats_until_stable() -> None:
    # The AWS key id is glued to a Google key, so its right boundary only appears once
    # the Google key has become a marker: a single pass would leave it behind.
    glued = f"{AKIA}{GOOGLE_KEY}"
    out = redact_text(glued)
    assert out == "[REDACTED:aws_access_key][REDACTED:google_api_key]"
    assert redact_text(out) == out


def test_rules_never_accept_a_match_over_a_marker() -> None:
    rule = redaction_rules._Rule("anything", (("x", 0),), re.compile(r"\S+"))
    assert rule.accepts(rule.pattern.match("x-plain-value"))
    assert not rule.accepts(rule.pattern.match("x[REDACTED:jwt]y"))


def test_contains_secret_agrees_with_redact_text() -> None:
    for text in ALL_TEXTS:
        assert contains_secret(text) == (redact_text(text) != text), text


def test_rules_version_is_a_positive_int() -> None:
    assert isinstance(RULES_VERSION, int) and not isinstance(RULES_VERSION, bool)
    assert RULES_VERSION >= 1


# ---------------------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------------------

# Pieces that put rules to work when glued together at random.
PIECES = [
    "password",
    "PASSWORD",
    "passwd",
    "pass",
    "pwd",
    "DB_",
    "_",
    "-",
    "--",
    "secret",
    "token",
    "Token",
    "api_key",
    "apiKey",
    "key",
    "auth",
    "Authorization",
    "credentials",
    "Bearer ",
    "Basic ",
    "=",
    ": ",
    " = ",
    '"',
    "'",
    '\\"',
    "\n",
    " ",
    "://",
    "@",
    "user:",
    "mysql -p",
    "sshpass -p ",
    "curl -u a:",
    "docker login -p ",
    "login me password ",
    "[REDACTED:",
    "[REDACTED:x]",
    "]",
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "\\n",
    "AKIA",
    "ghp_",
    "sk-",
    "sk-ant-",
    "xoxb-",
    "eyJ",
    ".eyJ",
    "AIza",
    "npm_",
    "hf_",
    "SG.",
    "SK",
    "discord",
    "Q~",
    "&sig=",
    "(",
    ")",
    "$",
    "{",
    "}",
    ",",
    ";",
    AKIA,
    GHP,
    JWT,
    OPENAI_LEGACY,
    "hunter2x",
    "Abc123xyz!",
    rand(B62, 40),
    rand(B64, 40),
]
mixed_text = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=30).map(
    "".join
)

# Anything that might introduce a secret: without these, text must come back untouched.
KEYWORDS = [
    "pass",
    "pwd",
    "secret",
    "cret",
    "token",
    "ken",
    "key",
    "auth",
    "uth",
    "cred",
    "bearer",
    "basic",
    "://",
    "akia",
    "asia",
    "abia",
    "acca",
    "a3t",
    "gh",
    "gl",
    "xox",
    "slack",
    "sk",
    "rk_",
    "whsec",
    "aiza",
    "gocspx",
    "ya29",
    "eyj",
    "npm_",
    "pypi",
    "sg.",
    "hf_",
    "hrku",
    "q~",
    "begin",
    "mysql",
    "sshpass",
    "redis",
    "curl",
    "discord",
    "cord",
    "sig=",
    "twilio",
    "login",
    "docker",
    "account",
    "shared",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), mixed_text))
def test_property_never_raises_and_is_idempotent(text: str) -> None:
    once = redact_text(text)
    assert isinstance(once, str)
    assert redact_text(once) == once
    assert contains_secret(text) == (once != text)


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_property_text_without_keywords_is_unchanged(text: str) -> None:
    lowered = text.lower()
    assume(not any(word in lowered for word in KEYWORDS))
    assert redact_text(text) == text


json_values = st.recursive(
    st.one_of(
        st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(), mixed_text
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(
            st.one_of(st.text(max_size=12), st.sampled_from(PIECES)), children, max_size=5
        ),
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_property_redact_value_shape_and_idempotency(value: object) -> None:
    out = redact_value(value)

    def same_shape(a: object, b: object) -> None:
        if isinstance(a, dict):
            # Keys that hold a secret are stored keyed (issue 15: keys were never redacted);
            # every other key is kept as it was, and no two keys become one.
            assert isinstance(b, dict) and list(b) == [redaction.redact_key(k) for k in a]
            for key in a:
                same_shape(a[key], b[redaction.redact_key(key)])
        elif isinstance(a, list):
            assert isinstance(b, list) and len(a) == len(b)
            for x, y in zip(a, b, strict=True):
                same_shape(x, y)
        elif isinstance(a, str):
            assert isinstance(b, str)
        else:
            assert a == b and type(a) is type(b)

    same_shape(value, out)
    assert redact_value(out) == out


def _has_tuple(value: object) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, dict):
        return any(_has_tuple(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_tuple(item) for item in value)
    return False


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(json_values, min_size=1, max_size=4))
def test_property_unchanged_answers_as_redact_value_does(values: list[object]) -> None:
    """The one-scan check says yes exactly when redacting every value changes nothing."""
    memo: dict[str, str] = {}
    expected = all(redact_value(value) == value for value in values)
    assert redaction.unchanged(*values, memo=memo) is expected
    for text, result in memo.items():
        assert result == redact_text(text)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        # The channel "cli" is a clean anchor; a token after it must still be found.
        (("cli", {"a": "plain", "b": ["x", f"see {GHP}"]}), False),
        ((f"{GHP}", "cli"), False),
        (("cli", {"a": "plain"}, "/home/dev/src"), True),
        # Slack tokens start with the gate's separate literal.
        (({"out": "padding xxxxxxxx"}, {"note": f"token {XOXP}"}), False),
        (({"out": "xoxo and hugs"},), True),
        # A secret-named key's value goes whole; an empty one stays.
        (({"nested": {"password": "hunter2"}},), False),
        (({"nested": {"password": ""}},), True),
        (({"nested": {"password": "[REDACTED:password]"}},), True),
        # A key holding a secret is stored keyed.
        (({f"k {GHP}": 1},), False),
        # Tuples become lists.
        (({"a": ("x",)},), False),
        ((("x",),), False),
        # Anything that is no string or container is left as it is.
        (({"n": 1, "f": 1.5, "b": True, "z": None},), True),
        ((), True),
    ],
)
def test_unchanged_cases(values: tuple[object, ...], expected: bool) -> None:
    assert redaction.unchanged(*values) is expected
    assert all(redact_value(v) == v and not _has_tuple(v) for v in values) is expected


def test_unchanged_with_strings_that_hold_nuls_looks_at_each_whole() -> None:
    """NULs join the strings for the scan; a string holding one is still seen whole (a
    secret-named assignment cut at its NUL would read differently)."""
    for values in (
        ("cli\x00", {"a": f"x\x00{GHP}"}),
        ({"a": "key\x00"}, f"password = hunter2\x00{GHP}"),
        ("\x00", "\x00\x00", f"{GHP}\x00"),
    ):
        assert redaction.unchanged(*values) is False
        assert any(redact_value(v) != v for v in values)
    assert redaction.unchanged("cli\x00", {"a": "plain\x00text"}) is True


def test_unchanged_with_longest_asks_for_no_longer_string() -> None:
    payload = {"out": "y" * 50, "list": ["z" * 10]}
    assert redaction.unchanged(payload, longest=50) is True
    assert redaction.unchanged(payload, longest=49) is False
    assert redaction.unchanged(payload) is True


def test_unchanged_finds_a_secret_at_any_position_among_many_strings() -> None:
    """Strings joined for one scan: each position must map back to its own string."""
    strings = [f"clean {i} cli" for i in range(40)]
    for position in range(len(strings)):
        values = list(strings)
        values[position] = f"{values[position]} {GHP}"
        assert redaction.unchanged({"items": values}) is False
    assert redaction.unchanged({"items": strings}) is True


# ---------------------------------------------------------------------------------------
# Speed guards
# ---------------------------------------------------------------------------------------

ORDINARY_SHORT = [
    "Read",
    "Bash",
    "default",
    "startup",
    "PostToolUse",
    "/home/dev/src/web-frontend/orders/selectors.py",
    "Investigate slow query on the orders dashboard",
    "1959b9ef-58d0-4674-b34d-e73d60c290d0",
    "claude-sonnet-4-5",
    "List backups",
    "rg -n missing orders/selectors.py",
]


def test_prefilter_rejects_ordinary_short_strings() -> None:
    """Ordinary strings must not even reach the rules; that is where the speed comes from."""
    for text in ORDINARY_SHORT:
        assert redaction_engine._PREFILTER.search(text) is None, text


def test_ordinary_short_strings_are_fast() -> None:
    rounds = 2000
    start = time.perf_counter()
    for _ in range(rounds):
        for text in ORDINARY_SHORT:
            redact_text(text)
    per_string = (time.perf_counter() - start) / (rounds * len(ORDINARY_SHORT))
    # About 0.3 µs on a laptop; the bound is loose for slow CI, but catches losing the
    # prefilter (every rule scanning every string costs tens of microseconds).
    assert per_string < 10e-6, f"{per_string * 1e6:.2f} µs per string"


@pytest.mark.parametrize(
    "text",
    [
        "password=" * 20000,
        "://a:" * 30000,
        "-----BEGIN RSA PRIVATE KEY-----" + "A" * 100_000,
        "-----BEGIN RSA PRIVATE KEY-----\n" * 3000,
        "eyJ" * 40000,
        "eyJ" + "a" * 50000 + ".eyJ" + "b" * 50000,
        "mysql " * 20000,
        "curl " * 20000,
        "token " * 20000,
        "key=" * 30000,
        "Authorization: " * 10000,
        "password is " * 10000,
        "token `" * 10000,
        "credentials: a / " * 10000,
        "htpasswd -b " * 10000,
        "a" * 200_000,
        "ghp_" * 30000,
        "discord " * 20000,
    ],
    ids=lambda t: repr(t[:20]),
)
def test_pathological_inputs_stay_linear(text: str) -> None:
    start = time.perf_counter()
    once = redact_text(text)
    elapsed = time.perf_counter() - start
    assert elapsed < 3.0, f"{elapsed:.2f}s"
    assert redact_text(once) == once
