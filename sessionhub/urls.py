"""Top-level routes: the dashboard, login, the API under /api/v1/ with its schema and docs,
admin, health."""

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path, re_path
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from .apis import WhoAmIApi
from .errors import not_found
from .health import healthz

api_v1: list[URLPattern | URLResolver] = [
    path("whoami", WhoAmIApi.as_view(), name="whoami"),
    path("", include("lifecycle.urls")),
    path("", include("memory.urls")),
]

# Under /api/ an unrouted path answers in the API's error shape, not as an HTML page.
handler404 = "sessionhub.errors.not_found"
handler400 = "sessionhub.errors.bad_request"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    # Any other path under /api/ answers in the API's error shape, DEBUG or not (with
    # DEBUG on Django would show its HTML page instead of calling handler404).
    re_path(r"^api/", csrf_exempt(not_found), name="api-not-found"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("dashboard.urls")),
]
