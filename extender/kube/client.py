"""The one place that talks HTTP to the API server: client construction and raw JSON requests.

Short requests (binds, Events, patches, lists) go over keepalive.py's connections; watch
streams, and every request of a client behind a proxy, over the client's urllib3 pool.
Replies are read as raw bytes and parsed with orjson, never deserialized into the
kubernetes client's model classes: those are far too slow for node and pod lists,
and `create_namespaced_pod_binding` cannot even deserialize the Status a bind
returns. Errors become `extender.errors` classes that keep the HTTP status, the
Status `reason` and the server's message, so callers can tell a conflict (drop)
from a transient failure (retry). Nothing here logs headers: they carry the token.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.config.config_exception import ConfigException

from extender import metrics
from extender.errors import ClusterError, ConflictError, GoneError, NotFoundError
from extender.kube import keepalive

log = logging.getLogger(__name__)

# (connect, read) seconds: a slow API server must not hang a scheduling thread forever.
DEFAULT_TIMEOUT: tuple[float, float] = (5.0, 30.0)
JSON = "application/json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = "extender/0.1 (python scheduler extender)"

# Transport retries only (refused connection, stale pooled socket). urllib3's default also
# sleeps through 429/503 Retry-After by itself, which would hide throttling from the
# callers' own backoff and metrics; status codes always reach the caller here.
_RETRIES = urllib3.Retry(total=1, redirect=3, backoff_factor=0, respect_retry_after_header=False,
                         raise_on_status=False)

_IN_CLUSTER_ENV = ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")
_SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
_ERRORS_BY_STATUS: dict[int, type[ClusterError]] = {404: NotFoundError, 409: ConflictError, 410: GoneError}


def in_cluster() -> bool:
    """True when running in a pod with a service account (what load_incluster_config needs)."""
    return all(os.environ.get(name) for name in _IN_CLUSTER_ENV) and os.path.isfile(_SERVICE_ACCOUNT_TOKEN)


def _kubeconfig_paths(kubeconfig: str | None = None) -> list[Path]:
    if kubeconfig:
        return [Path(kubeconfig).expanduser()]
    env = os.environ.get("KUBECONFIG")
    if env:
        return [Path(p).expanduser() for p in env.split(os.pathsep) if p]
    return [Path("~/.kube/config").expanduser()]


def cluster_configured() -> bool:
    """Whether a cluster is reachable by configuration, for the "auto" source choice.

    In-cluster service account env vars, or a kubeconfig file (KUBECONFIG or ~/.kube/config).
    Says nothing about whether the API server answers.
    """
    if all(os.environ.get(name) for name in _IN_CLUSTER_ENV):
        return True
    return any(path.is_file() for path in _kubeconfig_paths())


def build_api_client(kubeconfig: str | None = None, context: str | None = None, *,
                     pool_size: int = 32) -> k8s_client.ApiClient:
    """An ApiClient from in-cluster config, or else from a kubeconfig (file and context).

    An explicit `kubeconfig` or `context` always wins over in-cluster config, so a
    developer can point a pod-hosted debug shell elsewhere. Raises ClusterError with
    a readable message when neither source works.
    """
    configuration = k8s_client.Configuration()
    try:
        if kubeconfig is None and context is None and in_cluster():
            k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]  # the kubernetes client ships no annotations
            source = "in-cluster service account"
        else:
            paths = _kubeconfig_paths(kubeconfig)
            if not any(p.is_file() for p in paths) and kubeconfig is None and context is None \
                    and all(os.environ.get(name) for name in _IN_CLUSTER_ENV):
                # In a pod (the kubelet set the Service variables) whose token is not mounted.
                raise ClusterError(f"running in a pod (KUBERNETES_SERVICE_HOST={os.environ['KUBERNETES_SERVICE_HOST']}) "
                                   f"but there is no ServiceAccount token at {_SERVICE_ACCOUNT_TOKEN}: the pod has "
                                   "automountServiceAccountToken: false, or its ServiceAccount or token volume is "
                                   "missing; mount the token (automountServiceAccountToken: true on the pod or its "
                                   "ServiceAccount) or pass --kubeconfig FILE")
            if not any(p.is_file() for p in paths):
                raise ClusterError(f"no kubeconfig found (looked at {', '.join(map(str, paths))}) "
                                   "and not running in a cluster: pass --kubeconfig FILE or set KUBECONFIG")
            # Several KUBECONFIG files are merged by the client, as kubectl does.
            config_file = kubeconfig or os.environ.get("KUBECONFIG") or str(paths[0])
            try:
                k8s_config.load_kube_config(  # type: ignore[no-untyped-call]  # the kubernetes client ships no annotations
                    config_file=config_file, context=context, client_configuration=configuration, persist_config=False)
            except ConfigException:
                raise
            except Exception as exc:  # the client trips over a file that is not a kubeconfig mapping
                raise ClusterError(f"cannot read the kubeconfig {config_file}: {type(exc).__name__}: {exc}; "
                                   f"`kubectl --kubeconfig {config_file} config view` shows what is wrong") from None
            source = f"kubeconfig {config_file}" + (f" context {context}" if context else "")
    except ConfigException as exc:
        raise ClusterError(f"cannot load cluster configuration: {exc}") from None
    # Ten watches hold a urllib3 connection each (nodes, pods, namespaces, seven storage kinds),
    # and the standalone scheduler binds on 16 threads besides (kept-alive pool, same size):
    # below that, a full pool opens and throws away a connection per request.
    configuration.connection_pool_maxsize = pool_size
    configuration.retries = _RETRIES
    api_client = k8s_client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    log.info("API server %s (from %s)", configuration.host, source)
    return api_client


def api_client_for(host: str, *, token: str | None = None, ca_cert: str | None = None,
                   verify_ssl: bool = True) -> k8s_client.ApiClient:
    """An ApiClient for an explicit URL: tests and tools that already know the server."""
    configuration = k8s_client.Configuration()
    configuration.host = host.rstrip("/")
    configuration.verify_ssl = verify_ssl
    if ca_cert:
        configuration.ssl_ca_cert = ca_cert
    if token:
        configuration.api_key["BearerToken"] = token
        configuration.api_key_prefix["BearerToken"] = "Bearer"
    configuration.retries = _RETRIES
    api_client = k8s_client.ApiClient(configuration)
    api_client.user_agent = USER_AGENT
    return api_client


# ---- requests --------------------------------------------------------------------------


# Credentials are looked up at most this often. The client's own lookup re-runs the
# config's refresh hook (which scans the environment for proxies) on every call: about
# 100 us, a third of a bind's CPU. Rotated tokens are valid for an hour or more, so a few
# seconds of caching never sends an expired one.
AUTH_CACHE_SECONDS = 10.0
_auth_cache: weakref.WeakKeyDictionary[k8s_client.ApiClient, tuple[float, dict[str, str]]] = (
    weakref.WeakKeyDictionary()
)
_auth_lock = threading.Lock()


def _auth_headers(api_client: k8s_client.ApiClient, method: str, path: str) -> dict[str, str]:
    now = time.monotonic()
    cached = _auth_cache.get(api_client)
    if cached is not None and cached[0] > now:
        return cached[1]
    headers: dict[str, str] = {}
    # Adds `authorization`, calling the config's refresh hook (rotated service account tokens).
    api_client.update_params_for_auth(headers, [], ["BearerToken"], path, method, None)
    with _auth_lock:
        _auth_cache[api_client] = (now + AUTH_CACHE_SECONDS, headers)
    return headers


def _url_and_headers(api_client: k8s_client.ApiClient, method: str, path: str,
                     query: Mapping[str, Any] | None, content_type: str | None) -> tuple[str, dict[str, str]]:
    headers = dict(api_client.default_headers)
    headers["Accept"] = JSON
    if content_type:
        headers["Content-Type"] = content_type
    headers.update(_auth_headers(api_client, method, path))
    return api_client.configuration.host.rstrip("/") + path + _query_string(query), headers


def _query_string(query: Mapping[str, Any] | None) -> str:
    pairs = {k: ("true" if v is True else "false" if v is False else v)
             for k, v in (query or {}).items() if v is not None}
    return "?" + urlencode(pairs) if pairs else ""


def _decode(data: bytes) -> Any:
    if not data:
        return {}
    return orjson.loads(data)


def error_from_reply(status: int, data: bytes, what: str, *, retry_after: str | None = None) -> ClusterError:
    """Turn an error reply into the matching ClusterError, keeping the server's Status.

    The exception also carries `details` (the Status details dict) and `retry_after`
    (seconds, from the header or the Status), for callers that need them.
    """
    reason = ""
    message = ""
    details: Mapping[str, Any] = {}
    try:
        body = orjson.loads(data) if data else None
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, Mapping) and body.get("kind") == "Status":
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
        raw_details = body.get("details")
        details = raw_details if isinstance(raw_details, Mapping) else {}
    elif data:
        message = data[:300].decode("utf-8", "replace").strip()
    error_type = _ERRORS_BY_STATUS.get(status, ClusterError)
    text = f"{what}: {status} {reason or 'error'}" + (f": {message}" if message else "")
    error = error_type(text, status=status, reason=reason)
    error.details = details  # type: ignore[attr-defined]  # extra fields of an API error, read with getattr
    error.server_message = message  # type: ignore[attr-defined]  # extra fields of an API error, read with getattr
    seconds: float | None = None
    for candidate in (retry_after, details.get("retryAfterSeconds")):
        try:
            seconds = float(candidate) if candidate is not None else None
        except (TypeError, ValueError):
            seconds = None
        if seconds is not None:
            break
    error.retry_after = seconds  # type: ignore[attr-defined]  # extra fields of an API error, read with getattr
    return error


def open_request(api_client: k8s_client.ApiClient, method: str, path: str, *,
                 query: Mapping[str, Any] | None = None, body: Any = None,
                 content_type: str | None = None,
                 timeout: float | tuple[float, float] = DEFAULT_TIMEOUT) -> urllib3.BaseHTTPResponse:
    """Send a request and return the raw, unread urllib3 response once its status is 2xx.

    Watches read the body incrementally from it; the caller must close it.
    Non-2xx replies and transport failures raise ClusterError (or a subclass).
    """
    if body is not None and content_type is None:
        content_type = JSON
    url, headers = _url_and_headers(api_client, method, path, query, content_type)
    what = f"{method} {path}"
    # Straight to the client's own connection pool (its TLS, proxy and retry settings):
    # the generated REST layer re-encodes bodies with the json module and re-checks
    # content types on every call, a measurable share of a bind's CPU.
    encoded = orjson.dumps(body) if body is not None else None
    if isinstance(timeout, tuple):
        deadline = urllib3.Timeout(connect=timeout[0], read=timeout[1])
    else:
        deadline = urllib3.Timeout(total=timeout)
    try:
        response = api_client.rest_client.pool_manager.request(
            method, url, body=encoded, headers=headers, timeout=deadline, preload_content=False)
    except urllib3.exceptions.HTTPError as exc:
        raise ClusterError(f"{what}: cannot reach the API server: {exc}") from None
    except OSError as exc:
        raise ClusterError(f"{what}: cannot reach the API server: {exc}") from None
    if not 200 <= response.status <= 299:
        try:
            data = response.data
        except (urllib3.exceptions.HTTPError, OSError):
            data = b""
        finally:
            response.release_conn()
        raise error_from_reply(response.status, data, what, retry_after=response.headers.get("Retry-After"))
    return response


def request_json(api_client: k8s_client.ApiClient, method: str, path: str, *,
                 query: Mapping[str, Any] | None = None, body: Any = None,
                 content_type: str | None = None,
                 timeout: float | tuple[float, float] = DEFAULT_TIMEOUT) -> dict[str, Any]:
    """Send one request and return the reply body as a dict (empty when the body is empty).

    Raises NotFoundError (404), ConflictError (409), GoneError (410) or ClusterError
    (anything else, `status` None for transport failures). `timeout` is total seconds
    or a (connect, read) pair. The request goes over the client's kept-alive connections
    (extender/kube/keepalive.py), or through urllib3 when the client needs a proxy.
    """
    status, data = request_bytes(api_client, method, path, query=query, body=body, content_type=content_type,
                                 timeout=timeout)
    return decode_reply(data, f"{method} {path}", status)


def request_bytes(api_client: k8s_client.ApiClient, method: str, path: str, *,
                  query: Mapping[str, Any] | None = None, body: Any = None,
                  content_type: str | None = None,
                  timeout: float | tuple[float, float] = DEFAULT_TIMEOUT) -> tuple[int, bytes]:
    """`request_json` without the decoding: the 2xx status and the reply's bytes, for a caller
    that trims them first (list pages: extender/kube/managedfields.py). Same errors."""
    pool = keepalive.for_client(api_client)
    started = time.perf_counter()
    try:
        if pool is None:
            status, data = _urllib3_exchange(api_client, method, path, query=query, body=body,
                                             content_type=content_type, timeout=timeout)
        else:
            status, data = _keepalive_exchange(api_client, pool, method, path, query=query, body=body,
                                               content_type=content_type, timeout=timeout)
    except ClusterError as exc:
        _observe(method, exc.status, started)
        raise
    _observe(method, status, started)
    return status, data


def decode_reply(data: bytes, what: str, status: int | None = None) -> dict[str, Any]:
    """A reply body as a dict (empty for an empty body); ClusterError when it is not a JSON object."""
    try:
        decoded = _decode(data)
    except orjson.JSONDecodeError as exc:
        raise ClusterError(f"{what}: reply is not JSON: {exc}", status=status) from None
    if not isinstance(decoded, dict):
        raise ClusterError(f"{what}: reply is not a JSON object", status=status)
    return decoded


_observers: dict[tuple[str, int | None], tuple[Any, Any]] = {}  # labelled children, looked up once


def _observe(method: str, status: int | None, started: float) -> None:
    children = _observers.get((method, status))
    if children is None:
        children = _observers[(method, status)] = (
            metrics.API_REQUESTS.labels(method=method, code=str(status) if status is not None else "error"),
            metrics.API_REQUEST_LATENCY.labels(method=method))
    children[0].inc()
    children[1].observe(time.perf_counter() - started)


def _keepalive_exchange(api_client: k8s_client.ApiClient, pool: keepalive.KeepAlivePool, method: str, path: str, *,
                        query: Mapping[str, Any] | None, body: Any, content_type: str | None,
                        timeout: float | tuple[float, float]) -> tuple[int, bytes]:
    what = f"{method} {path}"
    headers = [("Accept", JSON), *_auth_headers(api_client, method, path).items()]
    encoded = orjson.dumps(body) if body is not None else None
    if encoded is not None:
        headers.append(("Content-Type", content_type or JSON))
    target = path + _query_string(query)
    deadline = timeout if isinstance(timeout, tuple) else (timeout, timeout)
    try:
        reply = pool.request(method, target, headers, encoded, timeout=deadline)
    except keepalive.TransportError as exc:
        raise ClusterError(f"{what}: cannot reach the API server: {exc}") from None
    if not 200 <= reply.status <= 299:
        raise error_from_reply(reply.status, reply.body, what, retry_after=reply.headers.get("retry-after"))
    return reply.status, reply.body


def _urllib3_exchange(api_client: k8s_client.ApiClient, method: str, path: str, *,
                      query: Mapping[str, Any] | None, body: Any, content_type: str | None,
                      timeout: float | tuple[float, float]) -> tuple[int, bytes]:
    response = open_request(api_client, method, path, query=query, body=body,
                            content_type=content_type, timeout=timeout)
    try:
        return response.status, response.data
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise ClusterError(f"{method} {path}: reply cut short: {exc}") from None
    finally:
        response.release_conn()
