"""Root URLs."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from .api_root import ApiRoot
from .views import dashboard, not_found, server_failed

handler404 = not_found  # /api/...: JSON, as the API's own 404s (a path no API route matches, e.g. a bad id)
handler500 = server_failed  # 503 while the database cannot be reached

urlpatterns = [
    path("", dashboard, name="dashboard"),
    path("favicon.ico", RedirectView.as_view(url=static("favicon.ico"), permanent=True), name="favicon"),
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", ApiRoot.as_view(), name="api-root"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api_docs.html"),
        name="api-docs",
    ),
    path("api/review/", include("annotation.api_urls")),
    path("api/", include("mining.api.urls")),
    path("", include("mining.urls")),
    path("", include("feedback.urls")),
    path("review/", include("annotation.urls")),
]
