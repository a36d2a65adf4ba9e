"""pcapp settings: one module, every deploy-varying value from the environment (see .env.example)."""

import os
from pathlib import Path
from urllib.parse import unquote

import environ
from django.core.exceptions import ImproperlyConfigured

from pcapp.queues import STAGE_QUEUES, stage_queue

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# Embeddings, indexes, trained models and uploads live here, never in the database.
PCAPP_DATA_DIR = Path(env("PCAPP_DATA_DIR", default=str(BASE_DIR / "var"))).resolve()
# Largest corpus file accepted by the importers and the upload page.
PCAPP_MAX_UPLOAD_BYTES = env.int("PCAPP_MAX_UPLOAD_BYTES", default=2 * 1024**3)
# Most files a zip of a folder may hold (its directory is checked when it is uploaded; the import task unpacks it).
PCAPP_MAX_ZIP_MEMBERS = env.int("PCAPP_MAX_ZIP_MEMBERS", default=20_000)
# Longest sentence an import stores (characters): a document's longer ones are cut at sentence or clause boundaries,
# an aligned pair with a longer side is refused, naming the file and line.
PCAPP_MAX_SENTENCE_CHARS = env.int("PCAPP_MAX_SENTENCE_CHARS", default=2000)
# Uploads are removed when their import ends; `manage.py cleanup_uploads` (run by `./run app` at start) removes
# leftovers older than this that no pending or running import needs.
PCAPP_UPLOAD_RETENTION_HOURS = env.float("PCAPP_UPLOAD_RETENTION_HOURS", default=24.0)
# Crawl imports: the largest page (HTTP body) read; longer pages are skipped and counted (`too_large`).
PCAPP_CRAWL_MAX_PAGE_BYTES = env.int("PCAPP_CRAWL_MAX_PAGE_BYTES", default=8 * 1024**2)
# Where a crawl import spools a file's extracted pages before writing them (empty: the system's temp folder).
PCAPP_SPOOL_DIR = env("PCAPP_SPOOL_DIR", default="")
# Folders the API and `import_corpus` may import crawl files from by path (the data folder's crawls/ and any listed;
# uploads are not limited by this).
PCAPP_IMPORT_PATH_ROOTS = env.list("PCAPP_IMPORT_PATH_ROOTS", default=[])

# Signs sessions, CSRF and password-reset tokens. From the environment (or .env), else the per-install key that
# `./run app` writes into PCAPP_DATA_DIR/secret-key.txt the first time. The built-in development key (and the
# example's `change-me`) is refused with DEBUG off, except under the test runner (pytest sets PYTEST_VERSION).
DEV_SECRET_KEY = "dev-only-insecure-key-change-me"
SECRET_KEY_FILE = PCAPP_DATA_DIR / "secret-key.txt"
SECRET_KEY = env("SECRET_KEY", default="") or (
    SECRET_KEY_FILE.read_text(encoding="utf-8").strip() if SECRET_KEY_FILE.is_file() else ""
)
if SECRET_KEY and len(SECRET_KEY) < 50 and not (DEBUG or os.environ.get("PYTEST_VERSION")):
    raise ImproperlyConfigured(
        f"SECRET_KEY is {len(SECRET_KEY)} characters long; with DEBUG off it needs at least 50 (a random one: "
        "python -c 'import secrets; print(secrets.token_urlsafe(48))')."
    )
if SECRET_KEY in ("", DEV_SECRET_KEY, "change-me"):
    if not (DEBUG or os.environ.get("PYTEST_VERSION")):
        raise ImproperlyConfigured(
            "No SECRET_KEY (or a public example key) and DEBUG is off: set SECRET_KEY in the environment or .env, "
            f"or start with `./run app`, which writes a random key into {SECRET_KEY_FILE} the first time."
        )
    SECRET_KEY = SECRET_KEY or DEV_SECRET_KEY
# Compute threads per worker process (torch, faiss, BLAS); keep threads x concurrency <= free cores.
PCAPP_COMPUTE_THREADS = env.int("PCAPP_COMPUTE_THREADS", default=1)
# Processes that run language identification during imports (beside the importing process itself).
PCAPP_IMPORT_WORKERS = env.int("PCAPP_IMPORT_WORKERS", default=1)
PCAPP_DEFAULT_ENCODER = env("PCAPP_DEFAULT_ENCODER", default="")  # blank: mining.core.defaults.DEFAULT_ENCODER
# A running job's worker renews its lease every quarter of this; a job whose lease expired is stalled (worker gone).
PCAPP_JOB_LEASE_SECONDS = env.int("PCAPP_JOB_LEASE_SECONDS", default=120)
# Each worker's keeper looks after the running jobs this often (at most a quarter lease): leases, shards whose
# messages were lost, pending jobs whose task was never sent (after PCAPP_UNSENT_SECONDS) or was lost.
PCAPP_KEEPER_SECONDS = env.float("PCAPP_KEEPER_SECONDS", default=5.0)
PCAPP_UNSENT_SECONDS = env.int("PCAPP_UNSENT_SECONDS", default=30)

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "django_htmx",
    "template_partials",
    "mining",
    "annotation",
    "feedback",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # before any view or CSRF reads the body: its size for the sender (413, unread), control characters (400)
    "pcapp.middleware.BodyLimitMiddleware",
    "pcapp.middleware.ControlCharacterMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "pcapp.middleware.CSPMiddleware",  # django-csp's, with inline styles allowed on the API's HTML pages only
    "pcapp.middleware.DatabaseUnavailableMiddleware",  # 503 when a view finds the database away
    # last, as django-axes asks: it answers a locked-out login attempt
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "pcapp.urls"
WSGI_APPLICATION = "pcapp.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASES = {"default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/pcapp")}
# A Unix-socket directory comes percent-encoded in the URL's host (postgres://user@%2Fpath%2Fto%2Fsocket/db).
DATABASES["default"]["HOST"] = unquote(DATABASES["default"].get("HOST") or "")
DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
# The review requests' few hot statements are prepared once per connection (pcapp/sql.py); off behind a
# transaction-mode connection pooler.
PCAPP_DB_PREPARE = env.bool("PCAPP_DB_PREPARE", default=True)
if PCAPP_DB_PREPARE:  # psycopg prepares only what is asked (Django's own queries stay unprepared)
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("prepare_threshold", 2**31 - 1)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}
# Django's database sessions, loaded with one plain SQL statement (pcapp/sessions.py; the same table and encoding).
SESSION_ENGINE = "pcapp.sessions"
# API tokens expire this many days after they were made (`./run manage drf_create_token -r USER` makes a new one).
PCAPP_TOKEN_DAYS = env.int("PCAPP_TOKEN_DAYS", default=30)

# django-axes first: it refuses a login while its (username, address) pair is locked out.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
# Failed logins: after PCAPP_LOGIN_FAILURES failures of one username from one address, that pair is locked out for
# PCAPP_LOGIN_COOLOFF_MINUTES (429); a success resets the count. Per pair, so that nobody can lock a user out from
# another address.
AXES_FAILURE_LIMIT = env.int("PCAPP_LOGIN_FAILURES", default=5)
AXES_COOLOFF_TIME = env.float("PCAPP_LOGIN_COOLOFF_MINUTES", default=15.0) / 60
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# Behind a proxy (./run app's Caddy, or yours: PCAPP_PROXY_COUNT=1) the client's address is the proxy's last
# X-Forwarded-For entry; without one, REMOTE_ADDR.
PCAPP_PROXY_COUNT = env.int("PCAPP_PROXY_COUNT", default=0)
AXES_CLIENT_IP_CALLABLE = "pcapp.auth.client_ip"

# Served behind HTTPS (PCAPP_HTTPS=true, the proxy terminating TLS and sending X-Forwarded-Proto): redirect plain
# HTTP, secure cookies, HSTS. `manage.py check --deploy` is then clean.
PCAPP_HTTPS = env.bool("PCAPP_HTTPS", default=False)
SECURE_SSL_REDIRECT = PCAPP_HTTPS
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = PCAPP_HTTPS
SECURE_HSTS_SECONDS = env.int("PCAPP_HSTS_SECONDS", default=365 * 24 * 3600) if PCAPP_HTTPS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("PCAPP_HSTS_SUBDOMAINS", default=True)
SECURE_HSTS_PRELOAD = env.bool("PCAPP_HSTS_PRELOAD", default=True)
if PCAPP_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Content-Security-Policy: the app's own scripts and styles only (no inline code; the pages have none), images from
# the app or data: URLs (the charts), no framing, no plugins.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = PCAPP_DATA_DIR / "staticfiles"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024**2
FILE_UPLOAD_TEMP_DIR = None
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024**2

CELERY_BROKER_URL = env("CELERY_BROKER_URL", default="redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", default=None)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=6 * 3600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=6 * 3600 - 60)
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env("CELERY_TASK_DEFAULT_QUEUE", default="pcapp")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A sentence run's shard tasks go to their own queues (embed, index, search, io; see pcapp/queues.py), each renamed
# with PCAPP_QUEUE_<NAME>; `./run app`'s worker and `./run worker` without --queues listen on all of them.
PCAPP_STAGE_QUEUES = {name: stage_queue(name) for name in STAGE_QUEUES}
CELERY_TASK_ROUTES = {f"mining.shard_{name}": {"queue": queue} for name, queue in PCAPP_STAGE_QUEUES.items()}
# A message a dead worker held comes back to the queue after this (Redis); leases re-queue dead shards much sooner.
# A broker that does not answer (stopped, frozen, unreachable) costs a request or a worker a few seconds, never a hang:
# every socket operation times out after PCAPP_BROKER_TIMEOUT seconds and a publish is tried twice in all.
PCAPP_BROKER_TIMEOUT = env.float("PCAPP_BROKER_TIMEOUT", default=3.0)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=6 * 3600 + 600),
    "socket_timeout": PCAPP_BROKER_TIMEOUT,
    "socket_connect_timeout": PCAPP_BROKER_TIMEOUT,
    "max_retries": 1,
    "interval_start": 0.2,
    "interval_step": 0.5,
    "interval_max": 1.0,
}
CELERY_BROKER_CONNECTION_TIMEOUT = PCAPP_BROKER_TIMEOUT
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1.0}
# Rows per shard of a sentence run (embedding, index and query shards); candidates per filter and write shard.
PCAPP_SHARD_ROWS = env.int("PCAPP_SHARD_ROWS", default=50_000)
PCAPP_CANDIDATE_CHUNK_ROWS = env.int("PCAPP_CANDIDATE_CHUNK_ROWS", default=100_000)
# After a sentence run succeeds, a task estimates its kept pairs' precision from decoys (mining.services.precision).
PCAPP_PRECISION_AFTER_RUN = env.bool("PCAPP_PRECISION_AFTER_RUN", default=True)
# Site-restricted document runs: documents (both sides) per match shard; small sites are batched up to this.
PCAPP_SITE_SHARD_DOCS = env.int("PCAPP_SITE_SHARD_DOCS", default=2000)
# Compressed (IVF-PQ) index shards (mining/services/shards/pqstages.py): an IVF run whose smaller side has at least
# PCAPP_PQ_MIN_ROWS sentences uses them when its `index` is auto; the index shards of a side are searched in
# PCAPP_PQ_GROUPS groups (one queue each, `./run worker --holds`), each worker process keeps PCAPP_PQ_HELD_GROUPS
# groups in memory, and re-scores PCAPP_PQ_CANDIDATES compressed candidates a query exactly.
PCAPP_PQ_MIN_ROWS = env.int("PCAPP_PQ_MIN_ROWS", default=10_000_000)
PCAPP_PQ_GROUPS = env.int("PCAPP_PQ_GROUPS", default=1)
PCAPP_PQ_HELD_GROUPS = env.int("PCAPP_PQ_HELD_GROUPS", default=4)
PCAPP_PQ_CANDIDATES = env.int("PCAPP_PQ_CANDIDATES", default=32)
PCAPP_PQ_BYTES = env.int("PCAPP_PQ_BYTES", default=64)
CELERY_TASK_ROUTES["mining.site_shard"] = {"queue": PCAPP_STAGE_QUEUES["search"]}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "pcapp.auth.ExpiringTokenAuthentication",
    ],
    # Per-process counts in the default cache (set CACHE_URL to a shared Redis for exact counts across processes).
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env("PCAPP_API_RATE_ANON", default="60/min"),
        "user": env("PCAPP_API_RATE_USER", default="1200/min"),
    },
    "NUM_PROXIES": PCAPP_PROXY_COUNT or None,
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # DRF's JSON parser, refusing control characters in any string (400 naming the field), and its form parsers
    "DEFAULT_PARSER_CLASSES": [
        "pcapp.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 50,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "pcapp API",
    "VERSION": "1.0.0",
    # Swagger UI from drf-spectacular-sidecar's static files, not a CDN: /api/docs/ works on an offline machine.
    # The schema and its docs are for reviewers and staff (docs/PERMISSIONS.md): those who use the API.
    "SERVE_PERMISSIONS": ["pcapp.permissions.IsReviewer"],
    "SERVE_INCLUDE_SCHEMA": False,  # the schema's own endpoint is not part of the API it describes
    # request bodies get components of their own (FooRequest), so that the rules on what is accepted (no control
    # characters) are not imposed on answers
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # every operation lists its error answers (pcapp/api_schema.py); enums as drf-spectacular names them
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "pcapp.api_schema.document_errors"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
    # faiss's loader logs at INFO each instruction-set module it tries and fails to import ("Could not load library
    # with AVX2 support ... ModuleNotFoundError"): noise, since the installed faiss dispatches to its AVX-512 / AVX2
    # kernels at run time from the generic module (faiss.get_compile_options() lists them).
    "loggers": {
        "faiss.loader": {"level": "WARNING"},
        "axes": {"level": "WARNING"},  # django-axes logs every login and its database upkeep at INFO
    },
}
