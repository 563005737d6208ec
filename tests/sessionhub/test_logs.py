"""No secret reaches a log line: a key in a refused request's path, or in the development
server's request line, is written redacted (sessionhub/logs.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client

KEY = "AKIA" + "Q7HZ3KX2MW5NRT4P"  # the shape of an AWS access key id, not a live one


@pytest.mark.django_db
def test_a_key_in_a_refused_path_is_logged_redacted(client: Client, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    response = client.get(f"/api/v1/sessions/AWS_ACCESS_KEY_ID={KEY}")
    assert response.status_code in (401, 404)
    response = client.get(f"/no-such-page/{KEY}")
    assert response.status_code == 404

    lines = [(r.name, r.getMessage()) for r in caplog.records]
    refused = [message for name, message in lines if name == "django.request"]
    assert any("[REDACTED:aws_access_key]" in message for message in refused), lines
    assert not [line for line in lines if KEY in line[1]]


def test_the_development_servers_request_line_is_redacted(caplog: Any) -> None:
    caplog.set_level(logging.INFO)
    logging.getLogger("django.server").info('"GET /?token=%s HTTP/1.1" 404 179', KEY)
    [record] = [r for r in caplog.records if r.name == "django.server"]
    assert KEY not in record.getMessage()
    assert "[REDACTED:aws_access_key]" in record.getMessage()
    assert "HTTP/1.1" in record.getMessage()


def test_an_ordinary_message_keeps_its_arguments(caplog: Any) -> None:
    caplog.set_level(logging.INFO)
    logging.getLogger("django.server").info('"%s %s HTTP/1.1" %s', "GET", "/healthz", 200)
    [record] = [r for r in caplog.records if r.name == "django.server"]
    assert record.args == ("GET", "/healthz", 200)
    assert record.getMessage() == '"GET /healthz HTTP/1.1" 200'
