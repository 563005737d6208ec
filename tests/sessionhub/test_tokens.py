"""Teams and tokens a lead can't get wrong (issue 36): who a token is, hints that say
what to fix, a mistyped team refused, refused requests counted, the first admin never
locked out."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from rest_framework.test import APIClient

from sessionhub.models import ApiToken, Membership, Team
from sessionhub.refusals import refusals_fold
from sessionhub.services import team_get_or_create

pytestmark = pytest.mark.django_db


def test_whoami_names_the_team_token_and_scopes(team: Team, make_token: Any) -> None:
    _, raw = make_token(team, scopes=("ingest",), name="laptop")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    for method in (client.get, client.post):
        answer = method("/api/v1/whoami")
        assert answer.status_code == 200
        body = answer.json()
        assert body["team"] == "acme" and body["team_name"] == "Acme"
        assert (body["token"], body["scopes"]) == ("laptop", ["ingest"])
        assert raw not in answer.content.decode()


def test_whoami_refuses_a_wrong_token_and_counts_it(team: Team, make_token: Any) -> None:
    token, raw = make_token(team)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw[:-3]}xyz")
    for _ in range(3):
        answer = client.get("/api/v1/whoami")
        assert answer.status_code == 401
        assert answer.json()["code"] == "authentication_failed"
    assert ApiToken.objects.get(pk=token.pk).refused_count == 0  # not written per request
    refusals_fold([token])
    assert (token.refused_count, token.last_refused_status) == (3, 401)
    refusals_fold([token])  # folded once, not twice
    assert ApiToken.objects.get(pk=token.pk).refused_count == 3


def test_a_missing_scope_counts_as_a_refusal(team: Team, make_token: Any) -> None:
    token, raw = make_token(team, scopes=("ingest",))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/sessions").status_code == 403
    refusals_fold([token])
    assert (token.refused_count, token.last_refused_status) == (1, 403)


def test_a_token_without_bearer_gets_a_hint(team: Team, make_token: Any) -> None:
    _, raw = make_token(team)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=raw)
    answer = client.post("/api/v1/events", {}, format="json")
    assert answer.status_code == 401
    assert "needs 'Bearer '" in answer.json()["message"]
    client.credentials(HTTP_AUTHORIZATION=f"Token {raw}")
    assert "needs 'Bearer '" in client.get("/api/v1/sessions").json()["message"]


def test_a_trailing_slash_gets_a_json_404_naming_the_path(api: APIClient) -> None:
    answer = api.post("/api/v1/events/", {}, format="json")
    assert answer.status_code == 404
    body = answer.json()
    assert body["code"] == "not_found"
    assert body["extra"] == {"path": "/api/v1/events"}
    assert "without a slash" in body["message"]
    other = api.get("/api/v1/nothing/")
    assert other.status_code == 404 and other.json()["extra"] == {}


def test_a_token_for_a_mistyped_team_is_refused_listing_the_real_ones() -> None:
    team_get_or_create(slug="default", name="Default team")
    with pytest.raises(CommandError, match=r"There is no team 'team'\. Existing teams: default"):
        call_command("create_api_token", "TEAM", stdout=StringIO(), stderr=StringIO())
    assert list(Team.objects.values_list("slug", flat=True)) == ["default"]
    assert not ApiToken.objects.exists()

    out, err = StringIO(), StringIO()
    call_command("create_api_token", "globex", "--create-team", stdout=out, stderr=err)
    assert "NEW TEAM 'globex' was created for this token. Other teams: default." in err.getvalue()
    assert ApiToken.objects.get().team.slug == "globex"


def test_an_existing_team_takes_a_token_quietly() -> None:
    team_get_or_create(slug="default", name="Default team")
    err = StringIO()
    call_command("create_api_token", "default", "--quiet", stdout=StringIO(), stderr=err)
    assert err.getvalue() == ""
    assert ApiToken.objects.get().team.slug == "default"


def test_the_bootstrap_hint_names_the_real_team() -> None:
    call_command("bootstrap", stdout=StringIO())
    out = StringIO()
    call_command("bootstrap", stdout=out)
    assert "create_api_token default" in out.getvalue()
    assert "TEAM" not in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_a_superuser_in_no_team_picks_one_and_lands_on_its_data() -> None:
    team_get_or_create(slug="acme", name="Acme")
    team_get_or_create(slug="globex", name="Globex")
    root = get_user_model().objects.create_superuser("root", password="pw-root-123456")
    plain = get_user_model().objects.create_user("bob", password="pw-bob-1234567")
    client = Client()
    client.force_login(root)
    page = client.get("/").content.decode()
    assert "Join Acme" in page and "Join Globex" in page
    answer = client.post("/team/join", {"team": "globex"})
    assert answer.status_code == 302
    membership = Membership.objects.get(user=root)
    assert (membership.team.slug, membership.role) == ("globex", "admin")
    assert "You are not in a team yet" not in client.get("/").content.decode()

    # A user who is no superuser sees no picker and cannot join.
    client.force_login(plain)
    assert "Join Acme" not in client.get("/").content.decode()
    assert client.post("/team/join", {"team": "acme"}).status_code == 404
    assert not Membership.objects.filter(user=plain).exists()


def test_the_tokens_page_shows_last_event_and_refusals(
    team: Team, make_token: Any, client: Client
) -> None:
    token, raw = make_token(team, name="laptop")
    broken, _ = make_token(team, name="ci-runner")
    user = get_user_model().objects.create_user("lead", password="pw-lead-1234567")
    Membership.objects.create(team=team, user=user)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    sent = {"event_id": "e1", "kind": "session_start", "agent_id": "a", "session_id": "s1"}
    assert api.post("/api/v1/events", sent, format="json").status_code == 200
    api.credentials(HTTP_AUTHORIZATION=f"Bearer shub_{broken.prefix}_not-the-secret")
    for _ in range(2):
        assert api.post("/api/v1/events", sent, format="json").status_code == 401
    client.force_login(user)
    page = client.get("/tokens/").content.decode()
    token.refresh_from_db()
    broken.refresh_from_db()
    assert token.last_event_at is not None and broken.last_event_at is None
    assert broken.refused_count == 2 and token.refused_count == 0
    row = page.split(f'data-prefix="{broken.prefix}"')[1].split("</tr>")[0]
    assert '<strong class="warn">2</strong>' in row and "none yet" in row
    row = page.split(f'data-prefix="{token.prefix}"')[1].split("</tr>")[0]
    assert "none yet" not in row


def test_the_admin_names_sessionhub_and_its_models_properly(client: Client) -> None:
    root = get_user_model().objects.create_superuser("root", password="pw-root-123456")
    client.force_login(root)
    page = client.get("/admin/").content.decode()
    assert "SessionHub administration" in page
    assert "Django administration" not in page
    assert "LLM usage" in page and "Llm usage" not in page
    assert "API tokens" in page and "Api tokens" not in page


def test_refusals_of_unknown_or_revoked_tokens(team: Team, make_token: Any) -> None:
    token, raw = make_token(team)
    client = APIClient()
    # A prefix no token has: nobody's refusal, nothing kept for it.
    client.credentials(HTTP_AUTHORIZATION="Bearer shub_0badf00d_nothing-here")
    assert client.get("/api/v1/whoami").status_code == 401
    assert cache.get("shub:refused:0badf00d") is None
    # Revoked: counted against it.
    token.revoke()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    answer = client.get("/api/v1/whoami")
    assert answer.status_code == 401 and answer.json()["message"] == "Token revoked"
    refusals_fold(ApiToken.objects.all())
    token.refresh_from_db()
    assert token.refused_count == 1
