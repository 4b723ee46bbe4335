"""The REST semantics of kube-apiserver for the served resources, independent of HTTP.

``ApiHandler.handle`` takes an :class:`ApiRequest` and returns an :class:`ApiResponse`
or a :class:`~tests.fakeapi.watch.WatchPlan`; :mod:`tests.fakeapi.server` does the
sockets. Keeping HTTP out makes the rules here (preconditions, optimistic concurrency,
graceful deletion, status subresources, list pagination) readable in one place.
"""

from __future__ import annotations

import base64
import json
import random
import re
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from . import binding as binding_rules
from . import events, kinds, patches, resources
from .authz import Attributes, Authorizer, review_reply
from .clock import now_rfc3339
from .pods import DEFAULT_PRIORITY_CLASSES, deletion_grace_period, keep_resize_only
from .resources import ResourceType
from .routing import ApiRequest, ApiResponse, Route, discovery, parse_route
from .selectors import Selection, parse_field_selector, parse_label_selector
from .status import ApiError, FieldError, GoLiteral, success_status
from .store import Store
from .validation import check_decodable
from .watch import WatchPlan

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


@dataclass
class Settings:
    """Behaviour switches a test may flip on the fake (see FakeApiServer for the defaults)."""

    graceful_delete: bool = True
    copy_binding_labels: bool = True
    too_large_rv_wait: float = 3.0
    default_watch_timeout: float = 1800.0
    bookmark_interval: float = 1.0
    user: str = "fakeapi-user"
    priority_classes: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_PRIORITY_CLASSES))
    # metrics.k8s.io, as the aggregation layer serves it: "absent" (no APIService: 404, as on
    # envtest), "unavailable" (registered, metrics-server down: 503) or "served".
    metrics_api: str = "absent"
    # resource.k8s.io/v1 (DRA), served by default as in 1.36; off, the group is absent from
    # discovery and its paths answer 404, as with `--runtime-config=resource.k8s.io/v1=false`.
    dra_api: bool = True


_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand alphabet
_NON_API_PATHS = ("healthz", "readyz", "livez", "version")


def _outside_the_api(parts: list[str], aggregated: frozenset[str], withheld: frozenset[str]) -> bool:
    """Neither /api nor a served /apis/{group} (nor a health or version endpoint); `aggregated`
    are the aggregated groups installed now, `withheld` the built-in groups not served now."""
    if not parts:
        return False
    if parts[0] in _NON_API_PATHS or parts[0] == "api":
        return False
    if parts[0] != "apis":
        return True
    if len(parts) >= 2 and parts[1] in withheld:
        return True
    return len(parts) >= 2 and resources.api_group(parts[1]) is None and parts[1] not in aggregated


class ApiHandler:
    """Dispatches a decoded request to the REST rule it needs; the store lock makes each
    read-check-write sequence atomic, as etcd's guaranteed updates are. Also keeps the
    binding statistics tests assert on."""

    def __init__(
        self, store: Store, settings: Settings, authorizer: Authorizer, address: str = ""
    ) -> None:
        self.store = store
        self.settings = settings
        self.authz = authorizer
        self.address = address
        self.binding_counts: Counter[str] = Counter()
        self.bindings: list[dict[str, str]] = []
        self._stats_lock = threading.Lock()

    # -----------------------------------------------------------------------------------------
    # Entry point and routing
    # -----------------------------------------------------------------------------------------

    def handle(self, req: ApiRequest) -> ApiResponse | WatchPlan:
        parts = [p for p in req.path.split("/") if p]
        if len(parts) >= 2 and parts[0] == "apis" and parts[1] == resources.METRICS_GROUP:
            refusal = self._aggregated_refusal()
            if refusal is not None:
                return refusal
        if _outside_the_api(parts, self._aggregated(), self._withheld()):
            # Paths no API group serves fall through to the server's mux: plain text, no Status.
            return ApiResponse(404, b"404 page not found\n", {"Content-Type": "text/plain; charset=utf-8"})
        if req.method == "GET":
            discovery_reply = discovery(parts, self.address, self._aggregated(), self._withheld())
            if discovery_reply is not None:
                return discovery_reply
        if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
            return self._resource_request(req, "", "v1", parts[2:])
        if len(parts) >= 3 and parts[0] == "apis":
            if parts[1] == resources.AUTHZ_GROUP and parts[3:] == [
                resources.SELF_SUBJECT_ACCESS_REVIEWS
            ]:
                if req.method != "POST":
                    raise ApiError.method_not_allowed()
                return ApiResponse(201, review_reply(self.authz, req.json(), self.settings.user))
            return self._resource_request(req, parts[1], parts[2], parts[3:])
        raise ApiError.unknown_path()

    def _aggregated(self) -> frozenset[str]:
        return frozenset({resources.METRICS_GROUP}) if self.settings.metrics_api == "served" else frozenset()

    def _withheld(self) -> frozenset[str]:
        return frozenset() if self.settings.dra_api else frozenset({resources.RESOURCE_GROUP})

    def _aggregated_refusal(self) -> ApiResponse | None:
        """No APIService: the path is unknown (404). Registered but its service down: the
        aggregator's proxy answers 503 with a plain-text body (http.Error), not a Status."""
        if self.settings.metrics_api == "absent":
            raise ApiError.unknown_path()
        if self.settings.metrics_api == "unavailable":
            return ApiResponse(503, b"service unavailable\n", {"Content-Type": "text/plain; charset=utf-8"})
        return None

    def _authorize(self, verb: str, route: Route, name: str | None = None) -> None:
        resource = route.plural
        attrs = Attributes(
            verb=verb,
            group=route.group,
            resource=resource,
            subresource=route.subresource,
            namespace=route.namespace or "",
            name=name or route.name or "",
        )
        if not self.authz.allowed(attrs):
            raise ApiError.forbidden(
                resource, attrs.name, attrs.forbidden_reason(self.settings.user), route.group
            )

    def _resource_request(
        self, req: ApiRequest, group: str, version: str, rest: list[str]
    ) -> ApiResponse | WatchPlan:
        route = parse_route(group, version, rest)
        method = req.method
        if route.resource is None:  # legacy POST /api/v1/namespaces/{ns}/bindings
            if method != "POST":
                raise ApiError.method_not_allowed()
            self._authorize("create", route)
            return self._bind(req, route, url_name=None)
        rt = route.resource
        watching = route.legacy_watch or req.flag("watch")
        if route.legacy_watch and method != "GET":
            raise ApiError.method_not_allowed()
        if rt.namespaced and route.namespace is None and method != "GET":
            raise ApiError.method_not_allowed()  # e.g. POST /api/v1/pods: only reads span namespaces
        if (method != "GET" and rt is resources.NODE_METRICS) or (watching and "watch" not in rt.verbs):
            raise ApiError.method_not_allowed()
        if route.name is None:
            if method == "GET":
                if watching:
                    self._authorize("watch", route)
                    return self._watch(req, route)
                self._authorize("list", route)
                return self._list(req, route)
            if method == "POST":
                self._authorize("create", route, self._body_name(req))
                return self._create(req, route)
            if method == "DELETE" and "deletecollection" in rt.verbs:
                self._authorize("deletecollection", route)
                return self._delete_collection(req, route)
            raise ApiError.method_not_allowed()
        if route.subresource == "binding":
            if method != "POST":
                raise ApiError.method_not_allowed()
            self._authorize("create", route)
            return self._bind(req, route, url_name=route.name)
        if method == "GET":
            # Only the legacy /watch/ path watches one object (a field-selected watch on
            # metadata.name); ?watch=true on an object's own URL is a plain GET.
            if route.legacy_watch:
                self._authorize("watch", route)
                return self._watch(req, route)
            self._authorize("get", route)
            return self._get(route)
        if method == "PUT":
            self._authorize("update", route)
            return self._update(req, route)
        if method == "PATCH":
            self._authorize("patch", route)
            return self._patch(req, route)
        if method == "DELETE" and not route.subresource:
            self._authorize("delete", route)
            return self._delete(req, route)
        raise ApiError.method_not_allowed()

    @staticmethod
    def _body_name(req: ApiRequest) -> str:
        try:
            return str(
                ((json.loads(req.body or b"{}") or {}).get("metadata") or {}).get("name") or ""
            )
        except (ValueError, AttributeError):
            return ""

    # -----------------------------------------------------------------------------------------
    # Object representation
    # -----------------------------------------------------------------------------------------

    @staticmethod
    def _serve(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The stored object as this API group presents it (kind and apiVersion first)."""
        if rt.storage == "events":
            obj = events.from_storage(obj, rt.group)
        body = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
        return {"kind": rt.kind, "apiVersion": rt.api_version, **body}

    @classmethod
    def _list_item(cls, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """List items carry no kind/apiVersion on the wire (only the list itself does)."""
        item = cls._serve(rt, obj)
        del item["kind"], item["apiVersion"]
        return item

    @staticmethod
    def _to_storage(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        if rt.storage == "events":
            return events.to_storage(obj, rt.group)
        return obj

    def _selection(self, req: ApiRequest, route: Route) -> Selection:
        rt = route.resource
        assert rt is not None
        fields = parse_field_selector(req.param("fieldSelector"), rt.field_labels)
        if route.name is not None:  # watch on a single object
            fields = parse_field_selector(
                ",".join(filter(None, [req.param("fieldSelector"), f"metadata.name={route.name}"])),
                rt.field_labels,
            )
        return Selection(fields, parse_label_selector(req.param("labelSelector")), rt.fields_of)

    def _check_body_type(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        check_decodable(rt.kind, rt.version, obj)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rt.api_version:
            raise ApiError.bad_request(
                f"the API version in the data ({api_version}) does not match the "
                f"expected API version ({rt.api_version})"
            )
        if kind and kind != rt.kind:
            raise ApiError.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rt.kind})"
            )

    def _require_namespace(self, namespace: str) -> None:
        """NamespaceLifecycle admission: no new content in a namespace that does not exist."""
        if self.store.get("namespaces", "", namespace) is None:
            raise ApiError.not_found("namespaces", namespace)

    # -----------------------------------------------------------------------------------------
    # Reads
    # -----------------------------------------------------------------------------------------

    def _get(self, route: Route) -> ApiResponse:
        rt = route.resource
        assert rt is not None and route.name is not None
        obj = self.store.get(rt.storage, route.namespace or "", route.name)
        if obj is None:
            raise ApiError.not_found(rt.plural, route.name, rt.group)
        return ApiResponse(200, self._serve(rt, obj))

    @staticmethod
    def _parse_rv(value: str | None, param: str = "resourceVersion") -> int | None:
        if value in (None, "", "0"):
            return None
        try:
            rv = int(value)  # type: ignore[arg-type]
        except ValueError:
            raise ApiError(400, "BadRequest", f'invalid {param}: "{value}"') from None
        if rv < 0:
            raise ApiError(400, "BadRequest", f'invalid {param}: "{value}"')
        return rv

    def _list(self, req: ApiRequest, route: Route) -> ApiResponse:
        rt = route.resource
        assert rt is not None
        selection = self._selection(req, route)
        requested = self._parse_rv(req.param("resourceVersion"))
        if requested is not None and requested > self.store.resource_version:
            if not self.store.wait_for_rv(requested, self.settings.too_large_rv_wait):
                raise ApiError.too_large_resource_version(requested, self.store.resource_version)
        if requested is not None and req.param("resourceVersionMatch") == "Exact":
            if requested < self.store.floor(rt.storage):
                raise ApiError.expired(
                    f"too old resource version: {requested} ({self.store.floor(rt.storage)})"
                )
        items, list_rv = self.store.list(rt.storage, route.namespace)
        start_after: tuple[str, str] | None = None
        token = req.param("continue")
        if token:
            list_rv, start_after = self._decode_continue(token, rt)
        matching = []
        for obj in items:
            meta = obj["metadata"]
            key = (meta.get("namespace") or "", meta["name"])
            if start_after is not None and key <= start_after:
                continue
            if selection.matches(obj):
                matching.append((key, obj))
        metadata: dict[str, Any] = {"resourceVersion": str(list_rv)}
        try:
            limit = int(req.param("limit") or 0)
        except ValueError:
            raise ApiError.bad_request(f'invalid limit: "{req.param("limit")}"') from None
        if limit > 0 and len(matching) > limit:
            last_key = matching[limit - 1][0]
            metadata["continue"] = self._encode_continue(list_rv, last_key)
            metadata["remainingItemCount"] = len(matching) - limit
            matching = matching[:limit]
        served = []
        for _key, obj in matching:
            served.append(self._list_item(rt, obj))
        return ApiResponse(
            200,
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": metadata,
                "items": served,
            },
        )

    @staticmethod
    def _encode_continue(rv: int, key: tuple[str, str]) -> str:
        raw = json.dumps(
            {"v": "meta.k8s.io/v1", "rv": rv, "start": "/".join(key).lstrip("/") + "\x00"}
        )
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def _decode_continue(self, token: str, rt: ResourceType) -> tuple[int, tuple[str, str]]:
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            rv = int(raw["rv"])
            start = raw["start"].rstrip("\x00")
        except (ValueError, KeyError, TypeError):
            raise ApiError.bad_request(
                "continue key is not valid: incorrect encoded start resourceVersion "
                "(version meta.k8s.io/v1)"
            ) from None
        if rv < self.store.floor(rt.storage):
            raise ApiError.expired(
                "The provided continue parameter is too old to display a consistent list result. You can start "
                "a new list without the continue parameter, or use the continue token in this response to "
                "retrieve the remainder of the results. Continuing with the provided token results in an "
                "inconsistent list - objects that were created, modified, or deleted between the time the first "
                "chunk was returned and now may show up in the list."
            )
        namespace, _, name = start.rpartition("/")
        return rv, (namespace, name)

    def _watch(self, req: ApiRequest, route: Route) -> WatchPlan:
        rt = route.resource
        assert rt is not None
        selection = self._selection(req, route)
        send_initial = req.flag("sendInitialEvents")
        since = None if send_initial else self._parse_rv(req.param("resourceVersion"))
        timeout = req.param("timeoutSeconds")
        # An int64 in ListOptions: "0.5" is refused like any other non-integer.
        if timeout and not re.fullmatch(r"[+-]?\d+", timeout):
            raise ApiError.bad_request(f'strconv.ParseInt: parsing "{timeout}": invalid syntax')
        timeout_s = float(timeout) if timeout else self.settings.default_watch_timeout
        return WatchPlan(
            resource=rt,
            namespace=route.namespace,
            selection=selection,
            since=since,
            bookmarks=req.flag("allowWatchBookmarks"),
            timeout=timeout_s,
            send_initial_events_end=send_initial,
            serve=lambda obj: self._serve(rt, obj),
        )

    # -----------------------------------------------------------------------------------------
    # Writes
    # -----------------------------------------------------------------------------------------

    def _create(self, req: ApiRequest, route: Route) -> ApiResponse:
        rt = route.resource
        assert rt is not None
        obj = req.json()
        self._check_body_type(rt, obj)
        obj = self._to_storage(rt, obj)
        meta = obj.setdefault("metadata", {})
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != route.namespace:
                raise ApiError.bad_request(
                    "the namespace of the provided object does not match the namespace "
                    "sent on the request"
                )
            meta["namespace"] = route.namespace
        if meta.get("resourceVersion"):
            # kube-apiserver answers this one with a bare 500 (no reason): rest.BeforeCreate's
            # error is not an API status error.
            raise ApiError(500, "", "resourceVersion should not be set on objects to be created")
        with self.store.lock:
            if rt.namespaced:
                assert route.namespace is not None
                self._require_namespace(route.namespace)
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generate_name(rt, route.namespace or "", meta["generateName"])
            return ApiResponse(201, self._serve(rt, self._store_new(rt, obj)))

    def _generate_name(self, rt: ResourceType, namespace: str, prefix: str) -> str:
        for _ in range(100):
            name = prefix[:58] + "".join(random.choice(_NAME_CHARS) for _ in range(5))
            if self.store.get(rt.storage, namespace, name) is None:
                return name
        raise ApiError(500, "InternalError", "unable to generate a unique name")

    def _priority_classes(self) -> dict[str, dict[str, Any]]:
        """Priority admission reads the built-in classes and the PriorityClass objects."""
        stored, _ = self.store.list("priorityclasses")
        classes: dict[str, dict[str, Any]] = {name: {"value": value}
                                              for name, value in self.settings.priority_classes.items()}
        classes.update({pc["metadata"]["name"]: pc for pc in stored})
        return classes

    def _store_new(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """Stamp identity, run the kind's create rules, store; caller holds the store lock."""
        meta = obj["metadata"]
        for server_field in (
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "managedFields",
            "selfLink",
        ):
            meta.pop(server_field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        obj["apiVersion"], obj["kind"] = "v1" if rt.storage == "events" else rt.api_version, rt.kind
        obj = kinds.prepare_create(rt, obj, self._priority_classes(), self.store)
        if (
            self.store.get(rt.storage, meta.get("namespace") or "", meta.get("name") or "")
            is not None
        ):
            raise ApiError.already_exists(rt.plural, meta["name"], rt.group)
        return self.store.create(rt.storage, obj)

    def _update(self, req: ApiRequest, route: Route) -> ApiResponse:
        rt = route.resource
        assert rt is not None and route.name is not None
        obj = req.json()
        self._check_body_type(rt, obj)
        obj = self._to_storage(rt, obj)
        meta = obj.setdefault("metadata", {})
        if meta.get("name") and meta["name"] != route.name:
            raise ApiError.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on "
                f"the URL ({route.name})"
            )
        if rt.namespaced and meta.get("namespace") and meta["namespace"] != route.namespace:
            raise ApiError.bad_request(
                "the namespace of the provided object does not match the namespace "
                "sent on the request"
            )
        meta["name"] = route.name
        if rt.namespaced:
            meta["namespace"] = route.namespace
        with self.store.lock:
            old = self.store.get(rt.storage, route.namespace or "", route.name)
            if old is None:
                if rt.allow_create_on_update and not route.subresource:
                    if rt.namespaced:
                        assert route.namespace is not None
                        self._require_namespace(route.namespace)
                    meta.pop("resourceVersion", None)
                    return ApiResponse(201, self._serve(rt, self._store_new(rt, obj)))
                raise ApiError.not_found(rt.plural, route.name, rt.group)
            if not rt.allow_unconditional_update and not meta.get("resourceVersion"):
                # The registry names the resource here, not the kind: `leases.coordination.k8s.io`.
                raise ApiError.invalid(
                    rt.plural,
                    route.name,
                    [
                        FieldError(
                            "Invalid",
                            "metadata.resourceVersion",
                            GoLiteral("0"),
                            "must be specified for an update",
                        )
                    ],
                    rt.group,
                )
            return self._apply_update(rt, route, obj, old)

    def _patch(self, req: ApiRequest, route: Route) -> ApiResponse:
        rt = route.resource
        assert rt is not None and route.name is not None
        patch = req.json()
        content_type = req.headers.get("content-type", "")
        with self.store.lock:
            old = self.store.get(rt.storage, route.namespace or "", route.name)
            if old is None:
                raise ApiError.not_found(rt.plural, route.name, rt.group)
            if rt.custom and content_type.split(";", 1)[0].strip().lower() == patches.STRATEGIC_MERGE_PATCH:
                raise ApiError.unsupported_media_type_for_custom_resource()
            patched = patches.apply_patch(content_type, self._serve(rt, old), patch)
            self._check_body_type(rt, patched)
            patched = self._to_storage(rt, patched)
            meta = patched.setdefault("metadata", {})
            meta["name"] = route.name
            if rt.namespaced:
                meta["namespace"] = route.namespace
            return self._apply_update(rt, route, patched, old)

    def _apply_update(
        self, rt: ResourceType, route: Route, new: dict[str, Any], old: dict[str, Any]
    ) -> ApiResponse:
        """Optimistic concurrency, subresource rules, validation, then store. Lock held."""
        assert route.name is not None
        meta, old_meta = new["metadata"], old["metadata"]
        if meta.get("resourceVersion") and meta["resourceVersion"] != old_meta["resourceVersion"]:
            raise ApiError.stale_update(rt.plural, route.name, rt.group)
        if rt.storage == "pods" and route.subresource == "resize":
            new = keep_resize_only(new, old)
            meta = new["metadata"]
        if rt.has_status:
            if route.subresource == "status":
                # Status writes keep the old spec (the status strategies' PrepareForUpdate) but
                # may change metadata: labels, annotations and finalizers go through; a pod's
                # ownerReferences do not.
                new["spec"] = old.get("spec")
                if new["spec"] is None:
                    new.pop("spec")
                if rt.storage == "pods":
                    if "ownerReferences" in old_meta:
                        meta["ownerReferences"] = old_meta["ownerReferences"]
                    else:
                        meta.pop("ownerReferences", None)
            elif "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        for kept in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if kept in old_meta:
                meta[kept] = old_meta[kept]
            else:
                meta.pop(kept, None)
        meta["resourceVersion"] = old_meta["resourceVersion"]
        new["apiVersion"], new["kind"] = old.get("apiVersion"), old.get("kind")
        if old_meta.get("deletionTimestamp"):
            added = [
                f
                for f in meta.get("finalizers") or []
                if f not in (old_meta.get("finalizers") or [])
            ]
            if added:
                raise ApiError.invalid(
                    rt.kind,
                    route.name,
                    [
                        FieldError(
                            "Forbidden",
                            "metadata.finalizers",
                            detail=f"no new finalizers can be added if the object is being deleted, found new "
                            f"finalizers []string{{{', '.join(json.dumps(f) for f in added)}}}",
                        )
                    ],
                    rt.group,
                )
        kinds.validate_update(rt, new, old, route.subresource)
        if new.get("spec") != old.get("spec") and "generation" in meta:
            meta["generation"] = int(meta["generation"]) + 1
        if (
            old_meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and old_meta.get("deletionGracePeriodSeconds", 0) == 0
        ):
            # The last finalizer is gone: the registry deletes the object as part of the update.
            self.store.update(rt.storage, new)
            gone = self.store.delete(rt.storage, route.namespace or "", route.name)
            return ApiResponse(200, self._serve(rt, gone))
        return ApiResponse(200, self._serve(rt, self.store.update(rt.storage, new)))

    # -----------------------------------------------------------------------------------------
    # Deletion
    # -----------------------------------------------------------------------------------------

    @staticmethod
    def _delete_options(req: ApiRequest) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if req.body.strip():
            options = req.json()
            if not isinstance(options, dict):
                raise ApiError.bad_request("the body of the request was not a DeleteOptions object")
        grace = req.param("gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = int(grace)
        return options

    def _delete(self, req: ApiRequest, route: Route) -> ApiResponse:
        rt = route.resource
        assert rt is not None and route.name is not None
        options = self._delete_options(req)
        with self.store.lock:
            obj = self.store.get(rt.storage, route.namespace or "", route.name)
            if obj is None:
                raise ApiError.not_found(rt.plural, route.name, rt.group)
            return self._delete_one(rt, obj, options)

    def _delete_one(
        self, rt: ResourceType, obj: dict[str, Any], options: dict[str, Any]
    ) -> ApiResponse:
        """Store.Delete: preconditions, graceful/finalizer handling, then removal. Lock held."""
        meta = obj["metadata"]
        name, namespace = meta["name"], meta.get("namespace") or ""
        pre = options.get("preconditions") or {}
        for attr, label, outcome in (("uid", "UID", "deleted and then recreated"),
                                     ("resourceVersion", "ResourceVersion", "modified")):
            if pre.get(attr) and pre[attr] != meta.get(attr):
                raise ApiError.conflict(
                    rt.kind,
                    name,
                    f"the {label} in the precondition ({pre[attr]}) does not match the {label} in "
                    f"record ({meta.get(attr)}). The object might have been {outcome}",
                    rt.group,
                )
        period = 0
        graceful = rt.storage == "pods"  # podStrategy implements CheckGracefulDelete
        if graceful:
            requested = options.get("gracePeriodSeconds")
            period = (
                deletion_grace_period(obj, requested)
                if self.settings.graceful_delete
                else 0
            )
        finalizers = meta.get("finalizers") or []
        if rt.storage == "namespaces":
            return self._delete_namespace(rt, obj)
        if meta.get("deletionTimestamp"):
            current = meta.get("deletionGracePeriodSeconds") or 0
            if period == 0 and not finalizers:
                return self._deleted_reply(rt, self.store.delete(rt.storage, namespace, name))
            if period < current:
                meta["deletionTimestamp"] = now_rfc3339(period)
                meta["deletionGracePeriodSeconds"] = period
                obj = self.store.update(rt.storage, obj)
            return ApiResponse(200, self._serve(rt, obj))
        if finalizers or graceful:
            # A graceful strategy always records the deletion first (a MODIFIED event with
            # deletionTimestamp and deletionGracePeriodSeconds), even with a period of 0;
            # then, when nothing holds the object, it is removed at once (DELETED).
            meta["deletionTimestamp"] = now_rfc3339(period)
            meta["deletionGracePeriodSeconds"] = period
            if "generation" in meta:
                meta["generation"] = int(meta["generation"]) + 1
            obj = self.store.update(rt.storage, obj)
            if finalizers or period > 0:
                return ApiResponse(200, self._serve(rt, obj))
        return self._deleted_reply(rt, self.store.delete(rt.storage, namespace, name))

    def _deleted_reply(self, rt: ResourceType, gone: dict[str, Any]) -> ApiResponse:
        if rt.return_deleted_object:
            return ApiResponse(200, self._serve(rt, gone))
        meta = gone["metadata"]
        details = {"name": meta["name"], "kind": rt.plural, "uid": meta.get("uid")}
        if rt.group:
            details = {
                "name": meta["name"],
                "group": rt.group,
                "kind": rt.plural,
                "uid": meta.get("uid"),
            }
        return ApiResponse(200, success_status(0, details))

    def _delete_namespace(self, rt: ResourceType, ns: dict[str, Any]) -> ApiResponse:
        """The namespace goes Terminating; the namespace controller's work (deleting the content,
        then the namespace) is done at once, since the fake has no controllers."""
        name = ns["metadata"]["name"]
        ns["metadata"]["deletionTimestamp"] = now_rfc3339()
        ns["metadata"]["deletionGracePeriodSeconds"] = 0
        ns["status"] = {"phase": "Terminating"}
        ns = self.store.update("namespaces", ns)
        for storage in self.store.storages():
            if storage == "namespaces":
                continue
            for key in self.store.keys(storage):
                if key[0] == name:
                    self.store.delete(storage, key[0], key[1])
        self.store.delete("namespaces", "", name)
        return ApiResponse(200, self._serve(rt, ns))

    def _delete_collection(self, req: ApiRequest, route: Route) -> ApiResponse:
        rt = route.resource
        assert rt is not None
        options = self._delete_options(req)
        selection = self._selection(req, route)
        deleted = []
        with self.store.lock:
            items, _ = self.store.list(rt.storage, route.namespace)
            for obj in items:
                if selection.matches(obj):
                    reply = self._delete_one(rt, obj, options)
                    if isinstance(reply.body, dict) and reply.body.get("kind") == rt.kind:
                        deleted.append(self._list_item(rt, reply.body))
            rv = self.store.resource_version
        return ApiResponse(
            200,
            {
                "kind": rt.list_kind,
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": deleted,
            },
        )

    # -----------------------------------------------------------------------------------------
    # Binding and access reviews
    # -----------------------------------------------------------------------------------------

    def _bind(self, req: ApiRequest, route: Route, url_name: str | None) -> ApiResponse:
        assert route.namespace is not None
        body = binding_rules.validate_binding(req.json(), url_name)
        meta = body.get("metadata") or {}
        if meta.get("namespace") and meta["namespace"] != route.namespace:
            raise ApiError.bad_request(
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
        name = meta.get("name") or ""
        with self.store.lock:
            pod = self.store.get("pods", route.namespace, name)
            bound = binding_rules.assign(
                pod, body, route.namespace, self.settings.copy_binding_labels
            )
            self.store.update("pods", bound)
        with self._stats_lock:
            self.binding_counts[f"{route.namespace}/{name}"] += 1
            self.bindings.append(
                {
                    "namespace": route.namespace,
                    "name": name,
                    "node": body["target"]["name"],
                    "uid": meta.get("uid") or "",
                }
            )
        return ApiResponse(201, success_status(201))

    # -----------------------------------------------------------------------------------------
    # Test-side helpers
    # -----------------------------------------------------------------------------------------

    def put_node_metrics(self, name: str, usage: dict[str, str], timestamp: str, window: str) -> dict[str, Any]:
        """Store what metrics-server would report for node ``name`` (tests set values this way)."""
        body = {"kind": "NodeMetrics", "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": name, "creationTimestamp": now_rfc3339()},
                "timestamp": timestamp, "window": window, "usage": dict(usage)}
        with self.store.lock:
            if self.store.get("nodemetrics", "", name) is None:
                return self.store.create("nodemetrics", body)
            return self.store.update("nodemetrics", body)

    def create_default_namespaces(self) -> None:
        ns_type = resources.NAMESPACE
        with self.store.lock:
            for name in DEFAULT_NAMESPACES:
                if self.store.get("namespaces", "", name) is None:
                    self._store_new(ns_type, {"metadata": {"name": name}})
