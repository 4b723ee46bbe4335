"""Users with exactly the permissions a test gives them, on a real kube-apiserver (envtest).

The fake's switchable authorizer denies one permission to everybody at once; a real
server has RBAC instead, so the same situation ("the scheduler lacks pods/binding") is
made there with a user of its own: a client certificate from the control plane's CA and a
ClusterRole (plus, for namespaced grants, a Role) holding exactly the given rules. A grant
can be revoked and restored while the code under test runs (its RoleBinding deleted and
created again), which is how a real server refuses a lease renewal mid-flight.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .client import KubeApiError, KubeTestClient

if TYPE_CHECKING:
    from extender.checks.permissions import Permission

    from .envtest import EnvtestControlPlane

RBAC = "/apis/rbac.authorization.k8s.io/v1"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
_serial = itertools.count(1)

Rule = Mapping[str, Any]


def rule(verbs: Iterable[str], resources: Iterable[str], group: str = "") -> dict[str, Any]:
    """One RBAC PolicyRule."""
    return {"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)}


def rules_for(permissions: Iterable[Permission]) -> list[dict[str, Any]]:
    """The RBAC rules granting exactly these extender.checks.permissions entries, one rule each."""
    return [rule([p.verb], [p.rbac_resource], p.group) for p in permissions]


@dataclass
class TestUser:
    """A user on a real server with a ClusterRole (``rules``) and, in ``namespace``, a Role
    (``namespaced_rules``); ``kubeconfig`` authenticates as that user."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    kube: KubeTestClient
    name: str
    kubeconfig: Path
    namespace: str = ""
    objects: list[str] = field(default_factory=list)  # API paths, deleted by `delete`
    _role_binding: dict[str, Any] | None = None

    @property
    def _role_binding_path(self) -> str:
        return f"{RBAC}/namespaces/{self.namespace}/rolebindings"

    @property
    def client(self) -> KubeTestClient:
        """A client acting as this user (its client certificate)."""
        directory = self.kubeconfig.parent
        return KubeTestClient(
            self.kube.base_url,
            verify=self.kube.verify,
            cert=(str(directory / f"{self.name}.crt"), str(directory / f"{self.name}.key")),
        )

    def can(self, verb: str, resource: str, group: str = "", namespace: str = "",
            subresource: str = "") -> bool:
        """What a SelfSubjectAccessReview of this user answers."""
        attributes = {"verb": verb, "resource": resource, "group": group}
        if namespace:
            attributes["namespace"] = namespace
        if subresource:
            attributes["subresource"] = subresource
        client = self.client
        try:
            review = client.call("POST", SSAR, {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            })  # fmt: skip
        finally:
            client.close()
        return bool(review.get("status", {}).get("allowed"))

    def wait_can(self, expected: bool, verb: str, resource: str, group: str = "",
                 namespace: str = "", subresource: str = "", timeout: float = 10.0) -> None:
        """Wait until RBAC (which reads roles through an informer) says ``expected``."""
        KubeTestClient.wait_for(
            lambda: self.can(verb, resource, group, namespace, subresource) == expected,
            timeout=timeout, interval=0.05,
            message=f"{self.name} {'may' if expected else 'may not'} {verb} {resource}",
        )  # fmt: skip

    def revoke_namespaced(self) -> None:
        """Delete the RoleBinding: the namespaced rules stop applying (403 from now on)."""
        assert self._role_binding is not None
        name = self._role_binding["metadata"]["name"]
        self.kube.call("DELETE", f"{self._role_binding_path}/{name}")

    def restore_namespaced(self) -> None:
        assert self._role_binding is not None
        self.kube.call("POST", self._role_binding_path, self._role_binding)

    def delete(self) -> None:
        for path in reversed(self.objects):
            try:
                self.kube.call("DELETE", path)
            except KubeApiError as err:
                if err.code != 404:
                    raise


def create_user(
    plane: EnvtestControlPlane,
    kube: KubeTestClient,
    rules: Sequence[Rule],
    *,
    namespaced_rules: Sequence[Rule] = (),
    namespace: str = "default",
    groups: Sequence[str] = (),
    prefix: str = "test-user",
) -> TestUser:
    """A new user (unique name) holding exactly ``rules`` cluster-wide and ``namespaced_rules``
    in ``namespace``. Call ``delete()`` when done (the RBAC objects outlive a test otherwise)."""
    name = f"{prefix}-{next(_serial)}"
    user = TestUser(kube, name, plane.user_kubeconfig(name, groups), namespace)
    subject = [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}]
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    if rules:
        kube.call("POST", f"{RBAC}/clusterroles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name}, "rules": [dict(r) for r in rules],
        })  # fmt: skip
        user.objects.append(f"{RBAC}/clusterroles/{name}")
        kube.call("POST", f"{RBAC}/clusterrolebindings", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name}, "roleRef": role_ref, "subjects": subject,
        })  # fmt: skip
        user.objects.append(f"{RBAC}/clusterrolebindings/{name}")
    if namespaced_rules:
        kube.call("POST", f"{RBAC}/namespaces/{namespace}/roles", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [dict(r) for r in namespaced_rules],
        })  # fmt: skip
        user.objects.append(f"{RBAC}/namespaces/{namespace}/roles/{name}")
        user._role_binding = {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {**role_ref, "kind": "Role"}, "subjects": subject,
        }  # fmt: skip
        user.restore_namespaced()
        user.objects.append(f"{RBAC}/namespaces/{namespace}/rolebindings/{name}")
    return user
