"""Content-Security-Policy on every answer.

The dashboard and the admin load scripts, styles and images from the site itself only,
with no inline script, inline style or style attribute, so the policy allows nothing
else: whatever a hostile session stored and a page showed could not run even if it
escaped the templates' escaping. The API documentation pages (drf-spectacular's Swagger
UI and ReDoc) start their viewers with an inline script and are left out.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        super().__init__(get_response)
        self.exempt = tuple(getattr(settings, "CSP_EXEMPT_PATHS", ()))

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if not request.path.startswith(self.exempt):
            response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
