"""Watching pod groups of both APIs, when the API server serves them, and writing their status.

kube-scheduler v1.36's `scheduling.k8s.io/v1alpha2` is served only with its alpha gates and
`--runtime-config`; Coscheduling's `scheduling.x-k8s.io/v1alpha1` only where its CRD is installed.
Discovery decides, once at start: an API that is not served is logged once at INFO and left out
(gangs of that API are then not recognised; nothing fails). Each served API gets a Reflector
whose objects are parsed into `PodGroup`s (extender.model.podgroups) and handed to `on_group`;
the raw objects are kept, since the status patches are computed against what the server holds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any
from urllib.parse import quote

from extender import metrics
from extender.errors import ClusterError, InvalidObject, NotFoundError
from extender.kube import client as kube_client
from extender.kube.watching import Reflector
from extender.model.fields import metadata_of
from extender.model.podgroups import (
    API_COSCHEDULING,
    API_V1ALPHA2,
    GroupKey,
    PodGroup,
    parse_pod_group,
)

log = logging.getLogger(__name__)

_RESOURCE = "podgroups"

#: on_group(key, group): `group` None when the object is gone.
GroupHandler = Callable[[GroupKey, PodGroup | None], None]


def podgroups_path(api: str, namespace: str = "", name: str = "") -> str:
    base = f"/apis/{api}"
    if not namespace:
        return f"{base}/{_RESOURCE}"
    return f"{base}/namespaces/{quote(namespace, safe='')}/{_RESOURCE}" + (f"/{quote(name, safe='')}" if name else "")


def served_apis(api_client: Any) -> list[str]:
    """The pod-group APIs the server serves, by discovery (GET /apis/GROUP/VERSION)."""
    served = []
    for api in (API_V1ALPHA2, API_COSCHEDULING):
        try:
            listing = kube_client.request_json(api_client, "GET", f"/apis/{api}")
        except NotFoundError:
            log.info("pod groups of %s are not served by the API server: gang scheduling of that API is off", api)
            continue
        except ClusterError as exc:
            log.warning("discovery of %s failed (%s): gang scheduling of that API is off", api, exc)
            continue
        names = {r.get("name") for r in listing.get("resources") or () if isinstance(r, dict)}
        if _RESOURCE in names:
            served.append(api)
        else:
            log.info("%s does not serve podgroups: gang scheduling of that API is off", api)
    return served


class PodGroupSource:
    """One Reflector per served pod-group API; callbacks run on the watch threads."""

    def __init__(self, api_client: Any, on_group: GroupHandler, *, apis: Iterable[str] | None = None,
                 **reflector_options: Any) -> None:
        """`apis`: the APIs to watch (default: the served ones, by discovery at construction)."""
        self.api_client = api_client
        self.on_group = on_group
        self.apis = list(apis) if apis is not None else served_apis(api_client)
        self._raw: dict[GroupKey, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.reflectors = [
            Reflector(api_client, podgroups_path(api), resource=f"podgroups-{api.partition('.')[0]}",
                      on_list=partial(self._listed, api), on_event=partial(self._event, api), **reflector_options)
            for api in self.apis
        ]

    @property
    def enabled(self) -> bool:
        return bool(self.apis)

    @property
    def synced(self) -> bool:
        return all(r.synced for r in self.reflectors)

    def start(self) -> None:
        for reflector in self.reflectors:
            reflector.start()

    def stop(self, timeout: float = 5.0) -> None:
        for reflector in self.reflectors:
            reflector.stop(timeout)

    def raw(self, key: GroupKey) -> dict[str, Any] | None:
        with self._lock:
            return self._raw.get(key)

    def patch_status(self, key: GroupKey, patch: dict[str, Any]) -> bool:
        """Write a status patch (a merge patch of the status subresource; for both APIs it means
        what kube-scheduler's strategic merge patch means, the patch carrying whole lists).
        Errors are logged, never raised: the next outcome writes again."""
        path = podgroups_path(key.api, key.namespace, key.name) + "/status"
        try:
            updated = kube_client.request_json(self.api_client, "PATCH", path, body=patch, content_type=kube_client.MERGE_PATCH)
        except ClusterError as exc:
            log.warning("cannot write the status of pod group %s (%s): %s", key, key.api, exc)
            return False
        with self._lock:
            if key in self._raw:
                self._raw[key] = updated
        return True

    # ---- reflector callbacks ---------------------------------------------------------

    def _parse(self, api: str, obj: dict[str, Any]) -> PodGroup | None:
        try:
            return parse_pod_group(obj, api)
        except InvalidObject as exc:
            metrics.REJECTED_OBJECTS.labels(kind="PodGroup").inc()
            meta = metadata_of(obj)
            log.warning("skipping pod group %s/%s (%s): %s", meta.get("namespace"), meta.get("name"), api, exc)
            return None

    def _listed(self, api: str, items: Iterable[dict[str, Any]]) -> None:
        groups = {}
        for obj in items:
            group = self._parse(api, obj)
            if group is not None:
                groups[group.key] = (group, obj)
        with self._lock:
            gone = [key for key in self._raw if key.api == api and key not in groups]
            for key in gone:
                del self._raw[key]
            self._raw.update((key, obj) for key, (_group, obj) in groups.items())
        for key in gone:
            self.on_group(key, None)
        for key, (group, _obj) in groups.items():
            self.on_group(key, group)
        log.info("cluster state: %d pod groups of %s", len(groups), api)

    def _event(self, api: str, kind: str, obj: dict[str, Any]) -> None:
        meta = metadata_of(obj)
        if kind == "DELETED":
            key = GroupKey(api, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            with self._lock:
                self._raw.pop(key, None)
            self.on_group(key, None)
            return
        group = self._parse(api, obj)
        if group is None:
            return
        with self._lock:
            self._raw[group.key] = obj
        self.on_group(group.key, group)
