"""A switchable authorizer: what SelfSubjectAccessReviews answer and what requests may do.

The extender checks its permissions at start-up with SelfSubjectAccessReviews and must
name what is missing; tests exercise that by denying one permission. The same decision
is enforced on the request itself (403 Forbidden with RBAC's wording), so a test can
also see what happens when a permission is missing and the check was skipped.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partialmethod
from typing import Any

from .status import ApiError, FieldError

ANY = "*"


@dataclass(frozen=True)
class Attributes:
    """authorizer.Attributes of one request or review."""

    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # non-resource requests only

    @property
    def is_resource_request(self) -> bool:
        return bool(self.resource)

    def forbidden_reason(self, user: str) -> str:
        """RBAC's ``forbiddenMessage``."""
        if not self.is_resource_request:
            return f'User "{user}" cannot {self.verb} path "{self.path}"'
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        if self.namespace:
            return (
                f'User "{user}" cannot {self.verb} resource "{resource}" in API group "{self.group}" '
                f'in the namespace "{self.namespace}"'
            )
        return f'User "{user}" cannot {self.verb} resource "{resource}" in API group "{self.group}" at the cluster scope'


@dataclass(frozen=True)
class Rule:
    allow: bool
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str

    def matches(self, a: Attributes) -> bool:
        return all(
            want == ANY or want == got
            for want, got in (
                (self.verb, a.verb),
                (self.group, a.group),
                (self.resource, a.resource),
                (self.subresource, a.subresource),
                (self.namespace, a.namespace),
                (self.name, a.name),
            )
        )


Predicate = Callable[[Attributes], bool]


class Authorizer:
    """Allow everything until told otherwise; the last matching rule wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._predicate: Predicate | None = None

    def _add(
        self,
        allow: bool,
        verb: str = ANY,
        resource: str = ANY,
        subresource: str | None = None,
        group: str = ANY,
        namespace: str = ANY,
        name: str = ANY,
    ) -> None:
        """Add a rule for matching requests (rules added later override earlier ones).
        ``subresource`` defaults to the main resource only, as in RBAC (``pods`` does not cover
        ``pods/binding``); pass ``"*"`` for all, or ``resource="pods/binding"``."""
        if "/" in resource and subresource is None:
            resource, subresource = resource.split("/", 1)
        rule = Rule(allow, verb, group, resource, subresource or "", namespace, name)
        with self._lock:
            self._rules.append(rule)

    #: ``deny(verb, resource, subresource, group, namespace, name)``: deny matching requests.
    deny = partialmethod(_add, False)
    #: ``allow(...)``, as ``deny``: allow matching requests again.
    allow = partialmethod(_add, True)

    def deny_all(self) -> None:
        self._add(False, ANY, ANY, ANY, ANY, ANY, ANY)

    def set_allowed(self, predicate: Predicate | None) -> None:
        """Decide with a function of :class:`Attributes` instead of rules (None restores rules)."""
        with self._lock:
            self._predicate = predicate

    def reset(self) -> None:
        """Allow everything again: no rules, no predicate."""
        with self._lock:
            self._rules.clear()
            self._predicate = None

    def allowed(self, attrs: Attributes) -> bool:
        with self._lock:
            predicate, rules = self._predicate, list(self._rules)
        if predicate is not None:
            return bool(predicate(attrs))
        if not attrs.is_resource_request:
            return True
        decision = True
        for rule in rules:
            if rule.matches(attrs):
                decision = rule.allow
        return decision


def review_reply(authorizer: Authorizer, review: Any, user: str) -> dict[str, Any]:
    """Answer a SelfSubjectAccessReview the way the RBAC authorizer would for ``user``."""
    if not isinstance(review, dict):
        raise ApiError.bad_request(
            "the object provided is unrecognized (must be a SelfSubjectAccessReview)"
        )
    spec = review.get("spec") or {}
    res, non_res = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(res) == bool(non_res):
        raise ApiError.invalid(
            "SelfSubjectAccessReview",
            "",
            [
                FieldError(
                    "Invalid",
                    "spec.resourceAttributes",
                    "",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            ],
            "authorization.k8s.io",
        )
    if res:
        attrs = Attributes(
            verb=res.get("verb") or "",
            group=res.get("group") or "",
            resource=res.get("resource") or "",
            subresource=res.get("subresource") or "",
            namespace=res.get("namespace") or "",
            name=res.get("name") or "",
        )
    else:
        attrs = Attributes(verb=non_res.get("verb") or "", path=non_res.get("path") or "")
    allowed = authorizer.allowed(attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if allowed:
        status["reason"] = (
            f'RBAC: allowed by ClusterRoleBinding "fakeapi" of ClusterRole "cluster-admin" to User "{user}"'
        )
    return {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }
