"""Start-up permission check: ask the API server, by name, for every permission we need.

Without it a missing RBAC rule shows up as pods that stay Pending forever and a
403 buried in a log. With it the program refuses to start (or `extender check`
fails) with one line per missing permission and the `kubectl auth can-i` command
that reproduces each answer.

One SelfSubjectAccessReview per `Permission` (a review answers for one verb). The
request goes through `extender.kube.client.request_json` (the client's raw
`call_api`, reply read as plain JSON): the generated model classes are slow and have
had deserialisation bugs on Status replies, and a yes/no needs none of them.

To check another identity (`extender check` run by an admin for the deployed
ServiceAccount), give the ApiClient an `Impersonate-User` default header, as
`kubectl --as` does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from extender.checks.permissions import Permission, can_i_command, service_account_user
from extender.errors import ClusterError
from extender.kube.client import request_json

__all__ = [
    "SSAR_PATH",
    "PreflightError",
    "access_review",
    "check_permissions",
    "format_missing",
]

log = logging.getLogger(__name__)

SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


class PreflightError(ClusterError):
    """The permission check itself could not run (unreachable, refused, odd reply).

    Distinct from "a permission is missing", which `check_permissions` reports as
    data: here we do not know the answer at all.
    """


def access_review(permission: Permission, namespace: str = "") -> dict[str, Any]:
    """The SelfSubjectAccessReview body asking about `permission`.

    An empty namespace means "all namespaces" for a namespaced resource, which only
    a ClusterRole grants: exactly what pods, events and bindings need.
    """
    attributes: dict[str, str] = {
        "verb": permission.verb,
        "group": permission.group,
        "resource": permission.resource,
    }
    if permission.subresource:
        attributes["subresource"] = permission.subresource
    if namespace:
        attributes["namespace"] = namespace
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }


def check_permissions(
    api_client: Any,
    permissions: Iterable[Permission],
    *,
    namespace: str | None = None,
    timeout: float = 10.0,
) -> list[Permission]:
    """Return the permissions the API server says we lack (empty list: all granted).

    `namespace` is where namespaced permissions (the leader-election Lease) are
    needed; cluster-wide ones are asked for all namespaces.

    Raises PreflightError when a review cannot be made or read, including when
    creating SelfSubjectAccessReviews is itself forbidden.
    """
    missing: list[Permission] = []
    for permission in permissions:
        if permission.namespaced and not namespace:
            raise ValueError(f"{permission.describe()}: a namespace is needed to check it")
        body = access_review(permission, (namespace or "") if permission.namespaced else "")
        try:
            reply = request_json(api_client, "POST", SSAR_PATH, body=body, timeout=timeout)
        except ClusterError as exc:
            raise _preflight_error(exc, permission) from None
        status = reply.get("status")
        status = status if isinstance(status, dict) else {}
        if status.get("allowed") is not True or status.get("denied") is True:
            log.debug(
                "permission missing: %s (%s)",
                permission.describe(),
                status.get("reason") or status.get("evaluationError") or "no rule allows it",
            )
            missing.append(permission)
    return missing


def _preflight_error(exc: ClusterError, permission: Permission) -> PreflightError:
    if exc.status == 403:
        return PreflightError(
            "the API server refused the access review itself, so no permission can be "
            "checked. Creating selfsubjectaccessreviews is granted to every authenticated "
            "user by the built-in system:basic-user ClusterRole; when checking another "
            f"account, the caller also needs permission to impersonate it. ({exc})",
            status=exc.status,
            reason=exc.reason,
        )
    return PreflightError(
        f"checking {permission.describe()}: {exc}", status=exc.status, reason=exc.reason
    )


def format_missing(
    missing: Iterable[Permission],
    service_account: str,
    namespace: str,
    *,
    target_namespace: str | None = None,
) -> str:
    """A message naming every missing permission and the command that shows it.

    `service_account`/`namespace` name the account the program runs as (the
    account deploy/ creates); `target_namespace` is where namespaced permissions
    are needed when it is not the account's own namespace.
    """
    missing = list(missing)
    if not missing:
        return f"{service_account_user(namespace, service_account)} has every permission it needs."
    lines = [
        f"{service_account_user(namespace, service_account)} is missing "
        f"{len(missing)} permission{'s' if len(missing) != 1 else ''}:"
    ]
    for permission in missing:
        why = f" (needed to {permission.why})" if permission.why else ""
        lines.append(f"  - {permission.describe()}{why}")
        cmd = can_i_command(
            permission, service_account, namespace, target_namespace=target_namespace
        )
        lines.append(f"      {cmd}")
    lines.append("The ClusterRoles in deploy/ grant exactly these; re-apply them or compare.")
    return "\n".join(lines)
