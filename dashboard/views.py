"""The dashboard's pages: thin views over dashboard.selectors and the pin services.

Every page needs a login and shows only the teams the user is a member of; another
team's session, agent or pin is a 404, never a 403 (its existence is not revealed).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from memory import board, usage
from memory.models import Pin
from memory.services import pins as pin_services
from memory.services.pins import pinned_by_of
from sessionhub.audit import admin_user_id
from sessionhub.errors import error_body
from sessionhub.exceptions import ApiError
from sessionhub.models import Membership, Team
from sessionhub.services import membership_add

from . import presenters, selectors
from .forms import PinForm, SessionFilterForm, TeamSwitchForm

TEAM_SESSION_KEY = "dashboard_team"
OVERVIEW_DAYS = (7, 14, 30)
MAX_PAGE = 1_000_000  # far past any real list; keeps OFFSET within bigint

View = Callable[..., HttpResponse]


class MemberRequest(HttpRequest):
    """A request of a logged-in user, with the teams the dashboard may show them."""

    teams: list[Team]
    team: Team | None


def member_view(view: View) -> View:
    """Login required; attaches ``request.teams`` (the user's) and ``request.team``."""

    @login_required
    @wraps(view)
    def wrapped(request: MemberRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        request.teams = selectors.user_teams(request.user)
        wanted = request.GET.get("team")
        if wanted and any(t.slug == wanted for t in request.teams):
            # A link into another of the user's teams (?team=slug) switches to it.
            request.session[TEAM_SESSION_KEY] = wanted
        request.team = selectors.team_pick(request.teams, request.session.get(TEAM_SESSION_KEY))
        return view(request, *args, **kwargs)

    return wrapped


def live_view(view: View) -> View:
    """For the JSON poller: a 401 in the API's error shape instead of a login redirect."""

    @wraps(view)
    def wrapped(request: MemberRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not request.user.is_authenticated:
            return JsonResponse(error_body("Log in first", "not_authenticated"), status=401)
        request.teams = selectors.user_teams(request.user)
        return view(request, *args, **kwargs)

    return wrapped


def _page(
    request: MemberRequest, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    context.setdefault("teams", request.teams)
    context.setdefault("team", request.team)
    return render(request, template, context, status=status)


def _no_team(request: MemberRequest) -> HttpResponse:
    # A superuser is never stuck here: they see every team and may join one.
    joinable = list(Team.objects.order_by("name", "pk")) if request.user.is_superuser else []
    return _page(request, "dashboard/no_team.html", {"joinable": joinable})


@require_POST
@member_view
def team_join(request: MemberRequest) -> HttpResponse:
    """A superuser joins a team as its admin (the picker of the "no team" page)."""
    if not request.user.is_superuser:
        raise Http404("No such page")
    form = TeamSwitchForm(request.POST)
    team = Team.objects.filter(slug=form.data.get("team", "")).first() if form.is_valid() else None
    if team is None:
        raise Http404("No such team")
    membership_add(team=team, user=request.user, role=Membership.Role.ADMIN)
    _audit(request, team, CHANGE, f"Joined as admin from the dashboard: {request.user}")
    request.session[TEAM_SESSION_KEY] = team.slug
    messages.success(request, f"You joined {team.name} as an admin.")
    return redirect("dashboard:overview")


@member_view
def token_list(request: MemberRequest) -> HttpResponse:
    """The current team's API tokens: last request, last event stored, refused requests."""
    if request.team is None:
        return _no_team(request)
    tokens = selectors.tokens_of(request.team)
    return _page(request, "dashboard/token_list.html", {"tokens": tokens})


@member_view
def overview(request: MemberRequest) -> HttpResponse:
    """Counts and charts of the current team's recent sessions."""
    if request.team is None:
        return _no_team(request)
    try:
        days = int(request.GET.get("days", 14))
    except ValueError:
        days = 14
    days = days if days in OVERVIEW_DAYS else 14
    developer = request.GET.get("developer", "")[:200]
    project = request.GET.get("project", "")[:500]
    rows = selectors.overview_rows(request.team, days=days, developer=developer, project=project)
    data = presenters.overview(rows)
    return _page(
        request,
        "dashboard/overview.html",
        {
            "data": data,
            "day_choices": OVERVIEW_DAYS,
            "developers": selectors.developers_for_filter(request.team),
            "projects": selectors.projects_for_filter(request.team),
            # Did memory help? This week's figure, whatever the period shown.
            "memory_help": usage.usage_figure(request.team, days=7),
        },
    )


@member_view
def session_list(request: MemberRequest) -> HttpResponse:
    """The current team's sessions: filters, full-text search, sorting, pages."""
    team = request.team
    if team is None:
        return _no_team(request)
    form = SessionFilterForm(
        request.GET or None,
        agents=selectors.agents_for_filter(team),
        channels=selectors.channels_for_filter(team),
        developers=selectors.developers_for_filter(team),
        projects=selectors.projects_for_filter(team),
    )
    filters = form.filters() if request.GET else {"sort": "newest"}
    try:
        number = min(int(request.GET.get("page", 1)), MAX_PAGE)
    except ValueError:
        number = 1
    page = selectors.sessions_page(
        selectors.sessions_filter(team=team, **filters), number, count=not filters.get("q")
    )
    newest = max((s.started_at for s in page.rows if s.started_at), default=None)
    return _page(
        request,
        "dashboard/session_list.html",
        {
            "form": form,
            "page": page,
            "filtered": any(k != "sort" for k in filters),
            "newest": newest.isoformat() if newest and number == 1 else "",
        },
    )


@member_view
def session_detail(request: MemberRequest, session_id: str) -> HttpResponse:
    """One session: timeline, tail, summary, observations, pins, chain, continuity."""
    session = selectors.session_visible(request.teams, session_id)
    if session is None:
        raise Http404("No such session")
    # The session is one of the user's teams' (select_related: its team costs nothing).
    rows = selectors.session_rows(session.team, session)
    return _page(request, "dashboard/session_detail.html", {"d": presenters.session_detail(rows)})


BOARD_DAYS = (7, 14, 30)


@member_view
def open_work(request: MemberRequest) -> HttpResponse:
    """The team's board of open work: pending tasks of recent sessions, by project."""
    if request.team is None:
        return _no_team(request)
    try:
        days = int(request.GET.get("days", 14))
    except ValueError:
        days = 14
    days = days if days in BOARD_DAYS else 14
    projects = board.open_work(request.team, days=days)
    return _page(
        request,
        "dashboard/open_work.html",
        {
            "projects": projects,
            "days": days,
            "day_choices": BOARD_DAYS,
            "open_total": sum(p.open_count for p in projects),
            "task_total": sum(len(p.tasks) for p in projects),
        },
    )


@member_view
def agent_list(request: MemberRequest) -> HttpResponse:
    """The current team's agents."""
    if request.team is None:
        return _no_team(request)
    project = request.GET.get("project", "")[:500]
    developer = request.GET.get("developer", "")[:200]
    agents = selectors.agents_of(request.team, project=project, developer=developer)
    return _page(
        request,
        "dashboard/agent_list.html",
        {
            "groups": presenters.agents_by_project(agents),
            "agents": agents,
            "project": project,
            "developer": developer,
            "projects": selectors.projects_for_filter(request.team),
            "developers": selectors.developers_for_filter(request.team),
        },
    )


def _agent_page(
    request: MemberRequest,
    agent: Any,
    *,
    new_form: PinForm | None = None,
    failed: tuple[int, PinForm] | None = None,
    status: int = 200,
) -> HttpResponse:
    detail = selectors.agent_detail(agent)
    if failed and failed[0] not in {pin.pk for pin in detail.pins}:
        # The pin is no longer on the page (unpinned meanwhile): say why it was refused.
        for error in failed[1].non_field_errors():
            messages.error(request, str(error))
    edits = []
    for pin in detail.pins:
        if failed and failed[0] == pin.pk:
            edits.append((pin, failed[1]))
        else:
            initial = {"label": pin.label, "content": pin.content, "priority": pin.priority}
            edits.append((pin, PinForm(initial=initial, prefix=f"pin{pin.pk}")))
    cap = settings.SESSIONHUB["MAX_ACTIVE_PINS"]
    return _page(
        request,
        "dashboard/agent_detail.html",
        {
            "d": detail,
            "edits": edits,
            "new_form": new_form or PinForm(prefix="new"),
            "cap": cap,
            "room": max(0, cap - len(detail.pins)),
        },
        status=status,
    )


def _audit(request: MemberRequest, obj: Any, flag: int, message: str) -> None:
    # Pin edits from the dashboard land in the same audit log as admin changes.
    LogEntry.objects.log_actions(
        user_id=admin_user_id(request),
        queryset=[obj],
        action_flag=flag,
        change_message=message,
        single_object=True,
    )


@member_view
def agent_detail(request: MemberRequest, agent_id: str) -> HttpResponse:
    """An agent's pins (add one with POST) and recent sessions."""
    agent = selectors.agent_visible(request.teams, agent_id)
    if agent is None:
        raise Http404("No such agent")
    if request.method != "POST":
        return _agent_page(request, agent)
    form = PinForm(request.POST, prefix="new")
    if form.is_valid():
        try:
            pin = pin_services.pin_create(
                agent=agent, pinned_by=pinned_by_of(user=request.user), **form.cleaned_data
            )
        except ApiError as exc:
            form.add_error(None, exc.message)
        else:
            _audit(request, pin, ADDITION, "Pinned from the dashboard")
            messages.success(request, f"Pinned “{pin.label}”.")
            return redirect("dashboard:agent", agent_id=agent.pk)
    return _agent_page(request, agent, new_form=form, status=400)


def _pin_or_404(request: MemberRequest, pin_id: int) -> Pin:
    pin = selectors.pin_visible(request.teams, pin_id)
    if pin is None:
        raise Http404("No such pin")
    return pin


@require_POST
@member_view
def pin_edit(request: MemberRequest, pin_id: int) -> HttpResponse:
    """Change a pin's label, content or priority."""
    pin = _pin_or_404(request, pin_id)
    form = PinForm(request.POST, prefix=f"pin{pin.pk}")
    if form.is_valid():
        try:
            pin_services.pin_update(pin=pin, **form.cleaned_data)
        except ApiError as exc:
            form.add_error(None, exc.message)
        else:
            _audit(request, pin, CHANGE, "Changed from the dashboard")
            messages.success(request, f"Saved “{pin.label}”.")
            return redirect("dashboard:agent", agent_id=pin.agent_id)
    return _agent_page(request, pin.agent, failed=(pin.pk, form), status=400)


@require_POST
@member_view
def pin_unpin(request: MemberRequest, pin_id: int) -> HttpResponse:
    """Unpin (the pin is kept for provenance)."""
    pin = _pin_or_404(request, pin_id)
    pin_services.pin_unpin(pin=pin)
    _audit(request, pin, CHANGE, "Unpinned from the dashboard")
    messages.success(request, f"Unpinned “{pin.label}”.")
    return redirect("dashboard:agent", agent_id=pin.agent_id)


@require_POST
@member_view
def team_switch(request: MemberRequest) -> HttpResponse:
    """Choose which of the user's teams the overview and lists show."""
    form = TeamSwitchForm(request.POST)
    if form.is_valid():
        team = selectors.team_pick(request.teams, form.cleaned_data["team"])
        if team is None or team.slug != form.cleaned_data["team"]:
            raise Http404("No such team")
        request.session[TEAM_SESSION_KEY] = team.slug
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = ""
    return redirect(target or "dashboard:overview")


# --- the live poller's JSON ------------------------------------------------------------------


@require_GET
@live_view
def live_sessions(request: MemberRequest) -> JsonResponse:
    """States of the listed sessions (only the user's teams'), and how many are new."""
    ids = [v for v in request.GET.get("ids", "").split(",") if v]
    sessions = selectors.live_sessions(request.teams, ids)
    body: dict[str, Any] = {
        "sessions": [selectors.session_state(s) for s in sessions],
        "server_time": timezone.now().isoformat(),
    }
    since = parse_datetime(request.GET.get("since", "") or "")
    team = selectors.team_pick(request.teams, request.session.get(TEAM_SESSION_KEY))
    if since is not None and team is not None:
        body["new_sessions"] = selectors.sessions_started_since(team, since)
    return JsonResponse(body)


@require_GET
@live_view
def live_session(request: MemberRequest, session_id: str) -> JsonResponse:
    """One session's state and the timeline rows stored after ``after`` (an event id)."""
    session = selectors.session_visible(request.teams, session_id)
    if session is None:
        return JsonResponse(error_body("No such session", "not_found"), status=404)
    try:
        after = int(request.GET.get("after", 0))
    except ValueError:
        after = 0
    events = selectors.events_after(session, after)
    html = ""
    if events:
        html = render_to_string(
            "dashboard/_timeline_items.html",
            {"items": presenters.timeline(events)},
            request=request,
        )
    return JsonResponse(
        {
            "session": selectors.session_state(session),
            "events_html": html,
            "last_event_id": max((e.id for e in events), default=after),
        }
    )
