import hashlib

from django.apps import AppConfig
from django.conf import settings


class SessionHubConfig(AppConfig):
    """Teams, API tokens and health."""

    name = "sessionhub"
    verbose_name = "SessionHub"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_save

        from . import schema  # noqa: F401 - registers the OpenAPI auth extension
        from .db.lifetime import spread_expiry
        from .models import Team
        from .signals import on_user_or_team_saved
        from .text.redaction import set_identity_key

        post_save.connect(on_user_or_team_saved, sender=get_user_model(), dispatch_uid="su-team")
        post_save.connect(on_user_or_team_saved, sender=Team, dispatch_uid="su-team-team")
        # Kept connections expire one by one, not all in the same second.
        connection_created.connect(spread_expiry, dispatch_uid="su-spread-expiry")
        # Every process must hash identifiers alike (the redaction of an identifier that
        # holds a secret): the key comes from settings.
        configured = settings.SESSIONHUB.get("IDENTITY_KEY") or ""
        key = configured or "sessionhub-identity:" + settings.SECRET_KEY
        set_identity_key(hashlib.sha256(key.encode()).digest())
        _close_caches_only_when_they_close()


def _close_caches_only_when_they_close() -> None:
    """Django closes every cache after each request (``close_caches`` on
    ``request_finished``); for a backend whose ``close`` is the base class's, which does
    nothing, that is only the work of finding the request's caches again (a few per cent
    of a gateway request's CPU). Where every configured backend is such, the receiver is
    disconnected; a backend that does close something keeps it connected."""
    from django.core.cache import close_caches
    from django.core.cache.backends.base import BaseCache
    from django.core.signals import request_finished
    from django.utils.module_loading import import_string

    backends = [import_string(cache["BACKEND"]) for cache in settings.CACHES.values()]
    if all(backend.close is BaseCache.close for backend in backends):
        request_finished.disconnect(close_caches)
