"""SessionHub: the project package (settings, urls, Celery app, teams, tokens, health)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
