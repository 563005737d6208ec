"""The dashboard's forms: the session filters and pin editing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django import forms

from lifecycle.models import Agent, EndReason, SessionStatus, Source
from memory.models import Pin
from memory.services import pins as pin_services

from .selectors import SORTS

ANY = [("", "Any")]


class SessionFilterForm(forms.Form):
    """The session list's filters (GET); anything invalid is simply ignored."""

    q = forms.CharField(
        label="Search",
        required=False,
        max_length=200,
        help_text="Words from prompts, final messages and summaries",
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "e.g. changelog"}),
    )
    agent = forms.ChoiceField(label="Agent", required=False)
    status = forms.ChoiceField(label="Status", required=False, choices=ANY + SessionStatus.choices)
    channel = forms.ChoiceField(label="Channel", required=False)
    source = forms.ChoiceField(label="Source", required=False, choices=ANY + Source.choices)
    end_reason = forms.ChoiceField(
        label="End reason", required=False, choices=ANY + EndReason.choices
    )
    developer = forms.ChoiceField(label="Developer", required=False)
    project = forms.ChoiceField(label="Project", required=False)
    started_from = forms.DateField(
        label="Started from", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    started_to = forms.DateField(
        label="Started until", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    sort = forms.ChoiceField(
        label="Sort",
        required=False,
        choices=[(key, label) for key, (label, _) in SORTS.items()],
    )

    def __init__(
        self,
        *args: Any,
        agents: list[Agent],
        channels: list[str],
        developers: Sequence[str] = (),
        projects: Sequence[str] = (),
        **kw: Any,
    ) -> None:
        super().__init__(*args, **kw)
        agent_field = cast(forms.ChoiceField, self.fields["agent"])
        agent_field.choices = ANY + [(str(a.pk), agent_label(a)) for a in agents]
        cast(forms.ChoiceField, self.fields["channel"]).choices = ANY + [(c, c) for c in channels]
        cast(forms.ChoiceField, self.fields["developer"]).choices = ANY + [
            (d, d) for d in developers
        ]
        cast(forms.ChoiceField, self.fields["project"]).choices = ANY + [(p, p) for p in projects]

    def filters(self) -> dict[str, Any]:
        """The valid filters only; an invalid field counts as not set."""
        self.is_valid()
        cleaned = getattr(self, "cleaned_data", {})
        values = {name: cleaned.get(name) for name in self.fields if name not in self.errors}
        values["sort"] = values.get("sort") or "newest"
        return {k: v for k, v in values.items() if v not in (None, "")}


def agent_label(agent: Agent) -> str:
    """An agent as a menu names it: its name, and who runs it where that tells two apart."""
    name = agent.name or agent.external_id
    return f"{name} · {agent.developer}" if agent.developer else name


class PinForm(forms.Form):
    """Add or change a pin; the caps and duplicate labels are checked by the pin services."""

    label = forms.CharField(label="Label", max_length=pin_services.LABEL_MAX)
    content = forms.CharField(
        label="Content",
        required=False,
        max_length=pin_services.CONTENT_MAX,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    priority = forms.ChoiceField(
        label="Priority", choices=Pin.Priority.choices, initial=Pin.Priority.NORMAL
    )


class TeamSwitchForm(forms.Form):
    """Which of the user's teams the overview and the list show."""

    team = forms.SlugField(label="Team")
