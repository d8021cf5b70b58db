"""gunicorn configuration of the web container: ``gunicorn -c docker/gunicorn.conf.py
probebench.wsgi:application`` (docker/entrypoint.sh ``web``; every value can be set from the
environment, names below).

Why these choices (see docker/README.md):

- ``gthread`` workers: each worker process runs ``WEB_THREADS`` request threads and a main loop
  that keeps the heartbeat. A client uploading a 50 MB probe slowly holds one thread, not a whole
  worker, and is not killed for it: ``timeout`` only restarts a worker whose main loop is stuck. (The
  default ``sync`` worker served one request per process and killed any request, a slow upload
  included, after 30 s.) Waiting for a request's headers is done by the main loop, not a thread.
- ``WEB_BODY_IDLE_TIMEOUT``: a request body that stops arriving for this long is dropped (the
  thread is freed). A slow client is fine; a stalled one is not kept forever.
- Bounded request lines and headers, bounded memory growth (``max_requests`` with jitter).

Behind a reverse proxy, set ``FORWARDED_ALLOW_IPS`` to its address (and ``PROBEBENCH_NUM_PROXIES``
for the site's throttles); a proxy that buffers request bodies (nginx's default) also takes slow
clients off the web container entirely.
"""

import os


def _int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


bind = os.environ.get("WEB_BIND", "0.0.0.0:8000")
worker_class = "gthread"
workers = _int("WEB_WORKERS", 3)
threads = _int("WEB_THREADS", 8)
#: connections a worker keeps open at once (in flight + kept alive)
worker_connections = _int("WEB_WORKER_CONNECTIONS", 200)
#: seconds a worker's main loop may stay silent before the master restarts it
timeout = _int("WEB_TIMEOUT", 60)
graceful_timeout = _int("WEB_GRACEFUL_TIMEOUT", 30)
keepalive = _int("WEB_KEEPALIVE", 5)
#: seconds a request body may make no progress before the connection is dropped
BODY_IDLE_TIMEOUT = _int("WEB_BODY_IDLE_TIMEOUT", 30)

max_requests = _int("WEB_MAX_REQUESTS", 2000)
max_requests_jitter = _int("WEB_MAX_REQUESTS_JITTER", 200)
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

#: only these addresses may set X-Forwarded-Proto / X-Forwarded-For for gunicorn itself
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")
accesslog = os.environ.get("WEB_ACCESS_LOG", "-") or None
#: gunicorn's control socket (``gunicornc``): off unless a path is given, so that two instances
#: on one host never share the default one
control_socket = os.environ.get("WEB_CONTROL_SOCKET", "")
control_socket_disable = not control_socket
errorlog = "-"
# the heartbeat file on a memory filesystem when there is one (Docker's /tmp may be overlayfs)
if os.path.isdir("/dev/shm"):
    worker_tmp_dir = "/dev/shm"


def pre_request(worker, req):
    """Give the request's socket a read timeout: a body read that waits longer than
    ``BODY_IDLE_TIMEOUT`` for its next bytes fails, and the thread is free again."""
    sock = getattr(getattr(req, "unreader", None), "sock", None)
    if sock is not None and BODY_IDLE_TIMEOUT > 0:
        sock.settimeout(BODY_IDLE_TIMEOUT)
