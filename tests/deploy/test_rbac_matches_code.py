"""The RBAC in deploy/ grants exactly what extender/checks/permissions.py says each mode needs.

No more (least privilege) and no less (the preflight would fail, or worse, pods
would stay Pending). A permission added to the code but not to deploy/, or the
other way round, fails here with the difference spelled out.
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.checks.permissions import (
    DEFAULT_NAMESPACE,
    SERVICE_ACCOUNTS,
    Permission,
    required_permissions,
)

from . import find, render

OVERLAY_MODES = {"overlays/webhook": ("webhook",), "overlays/standalone": ("standalone",)}
ALL_MODES = ("webhook", "standalone")


def _rules_to_permissions(rules: list[dict[str, Any]], *, namespaced: bool) -> set[Permission]:
    granted: set[Permission] = set()
    for rule in rules:
        assert "nonResourceURLs" not in rule, f"unexpected non-resource rule {rule}"
        # The code models neither wildcards nor per-name grants: both would make the
        # comparison meaningless, so they are refused outright.
        assert not rule.get("resourceNames"), f"resourceNames are not modelled: {rule}"
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule.get(field, []), f"wildcard in {field}: {rule}"
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name, _, sub = resource.partition("/")
                for verb in rule["verbs"]:
                    granted.add(Permission(verb, name, group, sub, namespaced=namespaced))
    return granted


def granted_permissions(docs: list[dict[str, Any]], namespace: str, name: str) -> set[Permission]:
    """Every permission the rendered manifests grant to ServiceAccount namespace/name.

    Rules reached through a ClusterRoleBinding are cluster-wide; through a
    RoleBinding (to a Role, or to a ClusterRole) they hold in one namespace only.
    """
    roles = {("ClusterRole", d["metadata"]["name"], ""): d for d in find(docs, "ClusterRole")}
    roles.update(
        {("Role", d["metadata"]["name"], d["metadata"]["namespace"]): d for d in find(docs, "Role")}
    )
    granted: set[Permission] = set()
    for binding in find(docs, "ClusterRoleBinding") + find(docs, "RoleBinding"):
        subjects = binding.get("subjects") or []
        if not any(
            s["kind"] == "ServiceAccount" and s["name"] == name and s.get("namespace") == namespace
            for s in subjects
        ):
            continue
        ref = binding["roleRef"]
        in_namespace = binding["kind"] == "RoleBinding"
        key = (
            ref["kind"],
            ref["name"],
            binding["metadata"]["namespace"] if ref["kind"] == "Role" else "",
        )
        assert key in roles, (
            f"{binding['kind']} {binding['metadata']['name']} refers to {key}, not rendered"
        )
        if in_namespace:
            assert binding["metadata"]["namespace"] == namespace, (
                f"{binding['metadata']['name']}: namespaced grants belong in {namespace}"
            )
        granted |= _rules_to_permissions(roles[key]["rules"], namespaced=in_namespace)
    return granted


def difference(
    granted: set[Permission], required: list[Permission]
) -> tuple[set[Permission], set[Permission]]:
    """(granted but not required, required but not granted)."""
    return granted - set(required), set(required) - granted


def _assert_same(granted: set[Permission], required: list[Permission], mode: str) -> None:
    extra, missing = difference(granted, required)
    lines = [f"- deploy/ grants, code does not need: {p.describe()}" for p in sorted(extra)]
    lines += [f"- code needs, deploy/ does not grant: {p.describe()}" for p in sorted(missing)]
    assert not lines, f"RBAC for {mode} mode differs from extender/checks/permissions.py:\n" + "\n".join(
        lines
    )


@pytest.mark.parametrize("mode", ALL_MODES)
def test_full_install_grants_exactly_the_required_permissions(mode: str) -> None:
    docs = render("")
    granted = granted_permissions(docs, DEFAULT_NAMESPACE, SERVICE_ACCOUNTS[mode])
    _assert_same(granted, required_permissions(mode, bind=True, leader_elect=True), mode)


@pytest.mark.parametrize("overlay", sorted(OVERLAY_MODES))
def test_each_overlay_grants_exactly_its_modes_permissions(overlay: str) -> None:
    docs = render(overlay)
    for mode in ALL_MODES:
        granted = granted_permissions(docs, DEFAULT_NAMESPACE, SERVICE_ACCOUNTS[mode])
        if mode in OVERLAY_MODES[overlay]:
            _assert_same(granted, required_permissions(mode), mode)
        else:
            assert not granted, (
                f"{overlay} grants {SERVICE_ACCOUNTS[mode]} permissions it never uses"
            )


@pytest.mark.parametrize("mode", ALL_MODES)
def test_service_accounts_are_the_ones_the_code_names(mode: str) -> None:
    docs = render("")
    accounts = {
        (d["metadata"]["namespace"], d["metadata"]["name"]) for d in find(docs, "ServiceAccount")
    }
    assert (DEFAULT_NAMESPACE, SERVICE_ACCOUNTS[mode]) in accounts
    deployments = [
        d
        for d in find(docs, "Deployment")
        if d["spec"]["template"]["spec"].get("serviceAccountName") == SERVICE_ACCOUNTS[mode]
    ]
    assert len(deployments) == 1, f"one Deployment should run as {SERVICE_ACCOUNTS[mode]}"


def test_lease_namespace_in_args_matches_the_namespaced_grant() -> None:
    docs = render("overlays/standalone")
    (deployment,) = [
        d for d in find(docs, "Deployment") if d["metadata"]["name"] == "extender-scheduler"
    ]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--lease-namespace") + 1] == DEFAULT_NAMESPACE
    namespaced = {p for p in required_permissions("standalone") if p.namespaced}
    assert namespaced, "standalone with leader election needs a namespaced Lease grant"


def test_comparison_notices_drift_in_either_direction() -> None:
    """The check above must fail when code and manifests drift apart."""
    docs = render("")
    granted = granted_permissions(docs, DEFAULT_NAMESPACE, SERVICE_ACCOUNTS["webhook"])
    required = required_permissions("webhook")
    assert difference(granted, required) == (set(), set())

    # Code gains a permission that deploy/ lacks.
    added = Permission("delete", "pods")
    assert difference(granted, [*required, added]) == (set(), {added})

    # deploy/ gains a rule that the code does not need.
    role = next(
        d
        for d in find(docs, "ClusterRole")
        if d["metadata"]["name"] == "scheduler-extender-webhook"
    )
    role["rules"].append({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]})
    extra, missing = difference(
        granted_permissions(docs, DEFAULT_NAMESPACE, "extender-webhook"), required
    )
    assert extra == {Permission("get", "secrets")} and not missing

    # A cluster-wide grant where a namespaced one is needed (or vice versa) is drift too.
    lease = Permission("get", "leases", "coordination.k8s.io", namespaced=True)
    assert lease not in {Permission("get", "leases", "coordination.k8s.io", namespaced=False)}


LEDGER = {Permission(verb, "leases", "coordination.k8s.io", namespaced=True) for verb in ("get", "create", "update")}


def test_webhook_without_bind_needs_no_binding_permissions() -> None:
    without = set(required_permissions("webhook", bind=False))
    with_bind = set(required_permissions("webhook", bind=True))
    assert with_bind - without == {
        Permission("create", "pods", subresource="binding"),
        Permission("create", "bindings"),
        *LEDGER,  # binds of GPU pods go through the device ledger first
        # pod groups' held binds: the gang ledger, and the watch of every group's (extender/kube/gangledger.py)
        *(Permission(verb, "leases", "coordination.k8s.io", namespaced=True) for verb in ("list", "watch")),
        Permission("patch", "pods"),  # a gang's members refused while it was incomplete, annotated once it is
    }


def test_standalone_without_leader_election_needs_leases_only_for_the_device_ledger() -> None:
    without = required_permissions("standalone", leader_elect=False, devices=False)
    assert not [p for p in without if p.resource == "leases"]
    with_devices = required_permissions("standalone", leader_elect=False)
    assert {p for p in with_devices if p.resource == "leases"} == LEDGER


# --- the Helm chart: the same check for each of its modes and switches ---------------------

CHART_CASES = [
    pytest.param({}, {"webhook": {}, "standalone": {}}, id="all"),
    pytest.param({"standalone": {"enabled": False}}, {"webhook": {}}, id="webhook"),
    pytest.param({"webhook": {"enabled": False}, "kubeScheduler": {"enabled": False}},
                 {"standalone": {}}, id="standalone"),
    pytest.param({"webhook": {"bind": False}, "standalone": {"enabled": False}},
                 {"webhook": {"bind": False}}, id="webhook-without-bind"),
    pytest.param({"webhook": {"enabled": False}, "kubeScheduler": {"enabled": False},
                  "standalone": {"leaderElect": False}},
                 {"standalone": {"leader_elect": False}}, id="standalone-without-leader-election"),
]  # fmt: skip


@pytest.mark.parametrize("namespace", [DEFAULT_NAMESPACE, "sched"])
@pytest.mark.parametrize(("values", "expected"), CHART_CASES)
def test_chart_grants_exactly_the_required_permissions(
    values: dict[str, Any], expected: dict[str, dict[str, bool]], namespace: str
) -> None:
    """The chart, in any namespace, grants each mode it installs exactly what the code needs
    (with /bind off, less), and the modes it leaves out nothing."""
    from .charts import template

    docs = template(values, namespace=namespace)
    for mode in ALL_MODES:
        granted = granted_permissions(docs, namespace, SERVICE_ACCOUNTS[mode])
        if mode in expected:
            _assert_same(granted, required_permissions(mode, **expected[mode]), f"chart {mode}")
        else:
            assert not granted, f"the chart grants {SERVICE_ACCOUNTS[mode]} permissions it never uses"
