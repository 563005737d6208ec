"""Settings from the environment.

With nothing set SessionHub runs embedded: a SQLite file in the project folder and Celery
tasks executed in-process after commit. ``DATABASE_URL`` and ``REDIS_URL`` switch it to
PostgreSQL and Redis with real Celery workers. With ``DEBUG`` off a real ``SECRET_KEY``
is required.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import environ
from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()

# List prices, USD per million tokens: [input, output, cache read, cache write].
DEFAULT_PRICES: dict[str, list[float]] = {
    "claude-opus-4": [15.0, 75.0, 1.5, 18.75],
    "claude-sonnet-4": [3.0, 15.0, 0.3, 3.75],
    "claude-3-7-sonnet": [3.0, 15.0, 0.3, 3.75],
    "claude-3-5-sonnet": [3.0, 15.0, 0.3, 3.75],
    "claude-haiku-4": [1.0, 5.0, 0.1, 1.25],
    "claude-3-5-haiku": [0.8, 4.0, 0.08, 1.0],
    "gpt-4o-mini": [0.15, 0.6, 0.075, 0.15],
    "gpt-4o": [2.5, 10.0, 1.25, 2.5],
    "gpt-4.1": [2.0, 8.0, 0.5, 2.0],
    "gpt-5": [1.25, 10.0, 0.125, 1.25],
    "gemini-2.5-pro": [1.25, 10.0, 0.31, 1.25],
    "gemini-2.5-flash": [0.3, 2.5, 0.075, 0.3],
}


def _prices(raw: str) -> dict[str, list[float]]:
    """The price table: the defaults, with what ``SESSIONHUB_PRICES`` (JSON) adds."""
    import json

    table = {model: list(prices) for model, prices in DEFAULT_PRICES.items()}
    if not raw.strip():
        return table
    try:
        extra = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"SESSIONHUB_PRICES is not JSON: {exc}") from exc
    if not isinstance(extra, dict):
        raise ImproperlyConfigured("SESSIONHUB_PRICES must be a JSON object")
    for model, prices in extra.items():
        if (
            not isinstance(prices, list)
            or len(prices) != 4
            or not all(isinstance(p, (int, float)) and p >= 0 for p in prices)
        ):
            raise ImproperlyConfigured(
                f"SESSIONHUB_PRICES[{model!r}] must be [input, output, cache read, cache "
                "write] in USD per million tokens"
            )
        table[str(model).lower()] = [float(p) for p in prices]
    return table


# A local .env file is optional; real deployments set the environment directly.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)

SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (production) or DEBUG=1 (local development)."
        )
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG"  # noqa: S105

ALLOWED_HOSTS = env.list(
    "ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"] if DEBUG else []
)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "sessionhub",
    "lifecycle",
    "memory",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "sessionhub.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
# What a request under /api/v1/ passes through when the application server runs it
# (sessionhub.wsgi): the headers every answer carries, the host check (ALLOWED_HOSTS)
# and the answer's length. The API is token-authenticated JSON; the browser's sessions,
# sign-in, CSRF, messages and static files take no part in it and cost each request its
# time (about a tenth of an ingest request's instructions).
API_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "sessionhub.middleware.ContentSecurityPolicyMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
API_PATH_PREFIX = "/api/v1/"

ROOT_URLCONF = "sessionhub.urls"
WSGI_APPLICATION = "sessionhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- database -------------------------------------------------------------------------

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'sessionhub.sqlite3'}")
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Persistent connections: the ingest path must not pay a connect per request. Each is
    # kept for its own share of this, so threads reconnect one by one (db/lifetime.py).
    DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
    # Checked at each request's first query; a connection in use moments ago that shows
    # nothing wrong is checked without a round trip (sessionhub/db/postgresql/base.py).
    DATABASES["default"]["ENGINE"] = "sessionhub.db.postgresql"
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})
    DATABASES["default"]["OPTIONS"].setdefault("connect_timeout", 3)
    # A statement still running after this many seconds is cancelled by PostgreSQL
    # (its statement_timeout, sent as the connection opens): a request stuck behind a
    # lock or a runaway query ends with a 503 and frees its thread. The web server's
    # launcher sets 30 for its own processes (sessionhub/serve.py); 0 leaves the
    # database's setting alone (the worker's and the commands' default).
    _statement_timeout = env.float("DB_STATEMENT_TIMEOUT", default=0)
    _startup_options = str(DATABASES["default"]["OPTIONS"].get("options", ""))
    if _statement_timeout > 0 and "statement_timeout" not in _startup_options:
        DATABASES["default"]["OPTIONS"]["options"] = (
            f"{_startup_options} -c statement_timeout={round(_statement_timeout * 1000)}"
        ).strip()
else:
    DATABASES["default"].setdefault("OPTIONS", {})
    # SQLite: wait for the writer instead of failing at once; WAL lets readers go on.
    DATABASES["default"]["OPTIONS"].setdefault("timeout", 20)
    DATABASES["default"]["OPTIONS"].setdefault(
        "init_command", "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    )
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- broker and cache -----------------------------------------------------------------

REDIS_URL = env.str("REDIS_URL", default="")
# Every Redis client on the request path (cache, rate limiter, health check) gives up
# after these; after a first failure a circuit breaker skips Redis until it answers again
# (sessionhub/resilience.py), so a hung or stopped Redis costs a request milliseconds.
REDIS_CONNECT_TIMEOUT = env.float("REDIS_CONNECT_TIMEOUT", default=0.25)
REDIS_SOCKET_TIMEOUT = env.float("REDIS_SOCKET_TIMEOUT", default=0.25)

if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "sessionhub.cache.ResilientRedisCache",
            # The cache may live apart from the broker's database (CACHE_REDIS_URL).
            "LOCATION": env.str("CACHE_REDIS_URL", default=REDIS_URL),
            "OPTIONS": {
                "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
                "socket_timeout": REDIS_SOCKET_TIMEOUT,
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Celery: with no broker configured, tasks run eagerly in the web process (the caller
# enqueues them on commit, so they still run after the data is stored).
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
# Celery's Django fixup closes the database connection before and after every task unless
# this is set: each short memory run then paid for a new PostgreSQL backend. Connections
# are kept for this many tasks, and between tasks Django's own rule (CONN_MAX_AGE, health
# checks) closes an old or broken one, as between requests (sessionhub/celery.py).
CELERY_DB_REUSE_MAX = env.int("CELERY_DB_REUSE_MAX", default=1000)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
# Publishing sits after commit on the request path: fail fast when the broker is away
# and let the outbox sweep pick the work up later.
CELERY_TASK_PUBLISH_RETRY = False
CELERY_BROKER_CONNECTION_TIMEOUT = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": env.float("BROKER_CONNECT_TIMEOUT", default=1),
    # The worker's blocking reads need more than a second; web processes, which only
    # publish, get a shorter one from sessionhub/serve.py.
    "socket_timeout": env.float("BROKER_SOCKET_TIMEOUT", default=2),
    "visibility_timeout": 600,
    # One connection attempt per publish: kombu would otherwise retry for seconds on the
    # request path while Redis is away.
    "max_retries": 0,
}

# Periodic work is declared here and only here.
CELERY_BEAT_SCHEDULE = {
    "close-crashed-sessions": {
        "task": "lifecycle.tasks.close_crashed_sessions",
        "schedule": timedelta(minutes=1),
    },
    "sweep-outbox": {
        "task": "lifecycle.tasks.sweep_outbox",
        "schedule": timedelta(seconds=30),
    },
    "nightly-retention": {
        "task": "memory.tasks.apply_retention",
        "schedule": crontab(hour=3, minute=17),
    },
}

# --- auth, i18n, static ---------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard:overview"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- security (all on when DEBUG is off) ----------------------------------------------

SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# sessionhub/middleware.py: a strict Content-Security-Policy everywhere but the API docs,
# whose viewers start with an inline script.
CSP_EXEMPT_PATHS = ["/api/docs", "/api/redoc"]
SESSION_COOKIE_HTTPONLY = True
if not DEBUG:
    SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # Health probes come over plain HTTP from inside the deployment.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# --- API ------------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["sessionhub.authentication.ApiTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["sessionhub.permissions.HasTokenScope"],
    "DEFAULT_PARSER_CLASSES": ["sessionhub.parsers.StrictJSONParser"],
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_THROTTLE_CLASSES": ["sessionhub.throttling.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "token": env.str("API_RATE_LIMIT", default="6000/min"),
    },
    "EXCEPTION_HANDLER": "sessionhub.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "SessionHub API",
    "DESCRIPTION": (
        "Gateways post agent session lifecycle events; teams read sessions, timelines "
        "and memory. Authenticate with `Authorization: Bearer <token>`."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    # Every operation documents the error statuses it can answer, in the one error shape.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "sessionhub.errors.document_error_responses",
    ],
    "ENUM_NAME_OVERRIDES": {
        "SessionStatusEnum": "lifecycle.models.SessionStatus",
        "EventKindEnum": "lifecycle.models.EventKind",
        "EndReasonEnum": "lifecycle.models.EndReason",
        "SourceEnum": "lifecycle.models.Source",
    },
}

# --- SessionHub -----------------------------------------------------------------------

SESSIONHUB = {
    # ingestion
    "MAX_BATCH_EVENTS": env.int("SESSIONHUB_MAX_BATCH_EVENTS", default=1000),
    "MAX_BODY_BYTES": env.int("SESSIONHUB_MAX_BODY_BYTES", default=5 * 1024 * 1024),
    "MAX_CLOCK_SKEW": timedelta(hours=env.int("SESSIONHUB_MAX_CLOCK_SKEW_HOURS", default=24)),
    "MAX_EVENT_AGE": timedelta(days=env.int("SESSIONHUB_MAX_EVENT_AGE_DAYS", default=3 * 365)),
    # The hot statements (a quiet event's, a batch's insert from its JSON document) are
    # prepared once per database connection. Off for a pooler in transaction mode that
    # does not keep prepared statements (PgBouncer before 1.21, or max_prepared_statements 0).
    "PREPARED_STATEMENTS": env.bool("SESSIONHUB_PREPARED_STATEMENTS", default=True),
    "RETRY_AFTER_SECONDS": env.int("SESSIONHUB_RETRY_AFTER_SECONDS", default=5),
    # The key of the hashes that keep identifiers holding a secret apart (agent ids,
    # session ids, event ids, JSON keys). Empty: derived from SECRET_KEY. Changing it
    # gives such identifiers (and only those) new keys.
    "IDENTITY_KEY": env.str("SESSIONHUB_IDENTITY_KEY", default=""),
    # lifecycle
    "CRASH_HORIZON": timedelta(minutes=env.int("SESSIONHUB_CRASH_HORIZON_MINUTES", default=240)),
    "SUSPEND_HORIZON": timedelta(days=env.int("SESSIONHUB_SUSPEND_HORIZON_DAYS", default=7)),
    # An open session's memory work waits this long so one run takes in a burst of events.
    "MEMORY_SETTLE_SECONDS": env.float("SESSIONHUB_MEMORY_SETTLE_SECONDS", default=1.0),
    # While an open session's events keep coming, its memory is brought up to date at
    # most this often (a run per few events kept the worker busy beside ingestion).
    "MEMORY_BUSY_SECONDS": env.float("SESSIONHUB_MEMORY_BUSY_SECONDS", default=5.0),
    "OUTBOX_GRACE": timedelta(seconds=env.int("SESSIONHUB_OUTBOX_GRACE_SECONDS", default=60)),
    # The Celery worker's scheduling priority (nice value, 0-19): where it shares cores
    # with the web processes, ingestion goes first and memory work takes what is left.
    # 5 gives the worker about a third of a web process's share under contention; 10 (a
    # tenth) made summaries wait 1-3 s at p95 under 300 hook requests a second, for no
    # clear gain in the hooks' tail (docs/benchmarks.md).
    "WORKER_NICE": env.int("SESSIONHUB_WORKER_NICE", default=5),
    # Embedded mode (no broker, so no beat): sweeps run from the ingest path this often.
    "EMBEDDED_SWEEP_SECONDS": env.int("SESSIONHUB_EMBEDDED_SWEEP_SECONDS", default=60),
    "CLEAR_LINK_WINDOW": timedelta(minutes=10),
    "TOKEN_LAST_USED_RESOLUTION": timedelta(minutes=1),
    # An agent's "last seen" moves with its events, written at most this often.
    "AGENT_LAST_SEEN_RESOLUTION": timedelta(minutes=1),
    "TOKEN_CACHE_SECONDS": env.int("SESSIONHUB_TOKEN_CACHE_SECONDS", default=5),
    # memory
    "TAIL_TOKENS": env.int("SESSIONHUB_TAIL_TOKENS", default=100),
    "MAX_ACTIVE_PINS": env.int("SESSIONHUB_MAX_ACTIVE_PINS", default=10),
    # An OpenAI-compatible chat endpoint for summaries (OpenAI, Ollama, vLLM, LiteLLM...);
    # without one, summaries are extractive.
    # What tokens cost, for the overview's estimate: USD per million tokens as [input,
    # output, cache read, cache write], by model name prefix (the longest matching one).
    # SESSIONHUB_PRICES (JSON of the same shape) adds models or replaces these.
    "PRICES": _prices(env.str("SESSIONHUB_PRICES", default="")),
    "LLM": {
        "URL": env.str("SESSIONHUB_LLM_URL", default=""),
        "MODEL": env.str("SESSIONHUB_LLM_MODEL", default=""),
        "API_KEY": env.str("SESSIONHUB_LLM_API_KEY", default=""),
        "TIMEOUT": env.float("SESSIONHUB_LLM_TIMEOUT", default=20.0),
        "MAX_TOKENS": env.int("SESSIONHUB_LLM_MAX_TOKENS", default=600),
    },
    # continuity (constants of the cross-session design)
    "CONTINUITY": {
        "LOOKBACK_DAYS": env.int("SESSIONHUB_LOOKBACK_DAYS", default=7),
        "WEIGHT_RECENCY": env.float("SESSIONHUB_WEIGHT_RECENCY", default=0.4),
        "WEIGHT_TOPICS": env.float("SESSIONHUB_WEIGHT_TOPICS", default=0.35),
        "WEIGHT_PENDING": env.float("SESSIONHUB_WEIGHT_PENDING", default=0.25),
        "RECENCY_HOURS": env.float("SESSIONHUB_RECENCY_HOURS", default=168.0),
        "PENDING_PER_TASK": env.float("SESSIONHUB_PENDING_PER_TASK", default=0.25),
        "THRESHOLD": env.float("SESSIONHUB_CONTINUITY_THRESHOLD", default=0.25),
        "MAX_SOURCES": env.int("SESSIONHUB_CONTINUITY_MAX_SOURCES", default=3),
        "MAX_INHERITED_PINS": env.int("SESSIONHUB_MAX_INHERITED_PINS", default=5),
        "CRITICAL_PIN_DAYS": env.int("SESSIONHUB_CRITICAL_PIN_DAYS", default=7),
        "DECAY_FLOOR": env.float("SESSIONHUB_DECAY_FLOOR", default=0.3),
        "DECAY_PER_WEEK": env.float("SESSIONHUB_DECAY_PER_WEEK", default=0.4),
        "MIN_PIN_CONFIDENCE": env.float("SESSIONHUB_MIN_PIN_CONFIDENCE", default=0.5),
        "MAX_CANDIDATES": env.int("SESSIONHUB_CONTINUITY_MAX_CANDIDATES", default=200),
        # Beyond the reference formula: relevance of the first prompt (docs/continuity.md).
        "WEIGHT_RELEVANCE": env.float("SESSIONHUB_WEIGHT_RELEVANCE", default=0.6),
        "RELEVANCE_MIN": env.float("SESSIONHUB_RELEVANCE_MIN", default=0.3),
        # The first prompt replaces the start's choice only on strong evidence: this
        # relevance, this much more than the start's choice has, this many terms matched.
        "RELEVANCE_STRONG": env.float("SESSIONHUB_RELEVANCE_STRONG", default=0.4),
        "RELEVANCE_MARGIN": env.float("SESSIONHUB_RELEVANCE_MARGIN", default=0.2),
        "STRONG_MIN_TERMS": env.int("SESSIONHUB_STRONG_MIN_TERMS", default=2),
        # About four characters a token: 960 characters stay under 250 tokens.
        "PREAMBLE_MAX_CHARS": env.int("SESSIONHUB_PREAMBLE_MAX_CHARS", default=960),
        "PREAMBLE_MAX_TASKS": env.int("SESSIONHUB_PREAMBLE_MAX_TASKS", default=5),
        "PREAMBLE_MAX_TOPICS": env.int("SESSIONHUB_PREAMBLE_MAX_TOPICS", default=10),
    },
    # memory on demand: the MCP endpoint (docs/integrations.md, "Memory on demand")
    "MCP": {
        # Sessions whose summary, prompts or final message hold every term of a search,
        # read from each full-text index (newest first); and the team's newest sessions
        # read whatever their words.
        "SEARCH_MATCHES": env.int("SESSIONHUB_MCP_SEARCH_MATCHES", default=30),
        "SEARCH_RECENT": env.int("SESSIONHUB_MCP_SEARCH_RECENT", default=100),
        # How much recency lifts a search hit: score = relevance * (1 - w + w * recency).
        "SEARCH_RECENCY_WEIGHT": env.float("SESSIONHUB_MCP_SEARCH_RECENCY_WEIGHT", default=0.3),
        # The longest answer handed to an agent (about four characters a token).
        "ANSWER_MAX_CHARS": env.int("SESSIONHUB_MCP_ANSWER_MAX_CHARS", default=8000),
        "MAX_BODY_BYTES": env.int("SESSIONHUB_MCP_MAX_BODY_BYTES", default=256 * 1024),
    },
    # retention
    "RETENTION_DAYS": env.int("SESSIONHUB_RETENTION_DAYS", default=0),
    "ARCHIVE_DIR": env.path("SESSIONHUB_ARCHIVE_DIR", default=BASE_DIR / "archive"),
}

# --- logging --------------------------------------------------------------------------

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        # Django's own, for the development server's request lines.
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    # A secret in a URL or a message is redacted before anything writes it.
    "filters": {"redact": {"()": "sessionhub.logs.RedactingFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]},
        "django.server": {"class": "logging.StreamHandler", "formatter": "django.server"},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Request lines can carry query strings; keep Django's request logger at warnings.
        "django.request": {"level": "WARNING", "filters": ["redact"]},
        "django.server": {
            "handlers": ["django.server"],
            "level": "INFO",
            "propagate": False,
            "filters": ["redact"],
        },
    },
}
