"""The project as an operator meets it: settings from the environment, the deploy check,
the token command, health, the schema and docs, and docker-compose's consistency."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

from sessionhub.models import ApiToken, Team, hash_token

REPO = Path(__file__).resolve().parents[2]


def run_manage(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    for key in ("SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "SECURE_SSL_REDIRECT"):
        base.pop(key, None)
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_settings_refuse_to_start_without_a_secret_key() -> None:
    result = run_manage("check", env={"DEBUG": "0"})
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr


def test_check_deploy_is_clean_under_production_settings() -> None:
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={
            "DEBUG": "0",
            "SECRET_KEY": "a-long-random-production-secret-key-0123456789-abcdefghijklmnop",
            "ALLOWED_HOSTS": "sessionhub.example.com",
        },
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_embedded_default_runs_on_sqlite_with_tasks_in_process() -> None:
    code = (
        "import django, os; django.setup(); from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.REDIS_URL == '')"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update({"DEBUG": "1", "DJANGO_SETTINGS_MODULE": "sessionhub.settings"})
    env.pop("SECRET_KEY", None)
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["django.db.backends.sqlite3", "True", "True"], result.stderr


@pytest.mark.django_db
def test_create_api_token_prints_a_token_that_is_stored_hashed() -> None:
    out = StringIO()
    call_command("create_api_token", "newteam", "--scopes", "ingest,read", stdout=out)
    raw = next(line.strip() for line in out.getvalue().splitlines() if line.startswith("shub_"))
    token = ApiToken.objects.get()
    assert Team.objects.get().slug == "newteam"
    assert token.scopes == ["ingest", "read"]
    assert token.token_hash == hash_token(raw)
    assert raw not in {token.prefix, token.token_hash, token.name}
    assert raw.startswith(f"shub_{token.prefix}_")

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/sessions").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None


@pytest.mark.django_db
def test_create_api_token_refuses_unknown_scopes() -> None:
    with pytest.raises(Exception, match="Unknown scopes"):
        call_command("create_api_token", "newteam", "--scopes", "ingest,root", stdout=StringIO())
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_healthz_reports_database_and_broker(client: Any, settings: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["broker"]["ok"] is True

    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"]["ok"] is False


@pytest.mark.django_db
def test_openapi_schema_and_docs_are_served(client: Any) -> None:
    schema = client.get("/api/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    document = schema.json() if "json" in schema["Content-Type"] else yaml.safe_load(schema.content)
    paths = document["paths"]
    for path in (
        "/api/v1/events",
        "/api/v1/hooks/claude-code",
        "/api/v1/hooks/openclaw",
        "/api/v1/sessions",
        "/api/v1/sessions/{session_id}",
        "/api/v1/sessions/{session_id}/events",
    ):
        assert path in paths, path
    docs = client.get("/api/docs")
    assert docs.status_code == 200
    assert b"swagger-ui" in docs.content
    # Served from the project, so it works offline: every asset the page loads is one of
    # ours, and it names no other site. (Not a search for "cdn" in the page: its CSRF
    # token is random letters, which spelled it once in a few hundred runs.)
    page = docs.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert assets, page
    assert all(a.startswith("/") and not a.startswith("//") for a in assets), assets
    assert not re.search(r"(?i)\bhttps?://", page)


def test_docker_compose_has_every_service_and_setting() -> None:
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert set(services) >= {"postgres", "redis", "web", "worker", "beat"}
    for name in ("postgres", "redis", "web", "worker", "beat"):
        assert "healthcheck" in services[name], name
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        for key in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"):
            assert key in env, (name, key)
        assert env["DEBUG"] == "0"
        assert (
            env["DATABASE_URL"].startswith("postgres://")
            and "@postgres:5432/" in env["DATABASE_URL"]
        )
        assert env["REDIS_URL"].startswith("redis://redis:6379")
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "python -m sessionhub.serve" in services["web"]["command"]
    assert "migrate" in services["web"]["command"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "sessionhub", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "sessionhub", "beat"]
    volumes = set(compose["volumes"])
    assert {"pgdata", "redisdata"} <= volumes
    db_env = services["postgres"]["environment"]
    assert db_env["POSTGRES_DB"] == "sessionhub"
    assert (REPO / "Dockerfile").exists()


def test_docker_compose_publishes_only_the_buffering_proxy() -> None:
    """Slow clients meet nginx (deploy/nginx.conf), never the web server directly."""
    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}
    proxy = services["proxy"]
    assert proxy["image"].startswith("nginx:")
    assert "./deploy/nginx.conf:/etc/sessionhub/nginx.conf:ro" in proxy["volumes"]
    assert proxy["command"][:3] == ["nginx", "-c", "/etc/sessionhub/nginx.conf"]
    assert proxy["depends_on"]["web"]["condition"] == "service_healthy"
    assert "healthcheck" in proxy
    conf = (REPO / "deploy" / "nginx.conf").read_text()
    assert "server web:8000;" in conf and "listen 8080;" in conf
    for directive in ("client_body_timeout", "client_header_timeout", "proxy_request_buffering on"):
        assert directive in conf, directive


def test_beat_schedule_names_real_tasks() -> None:
    from django.conf import settings

    from sessionhub.celery import app

    app.loader.import_default_modules()
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert entry["task"] in app.tasks, entry["task"]
