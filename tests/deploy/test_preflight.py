"""The RBAC preflight and `extender check`, against the fake API server.

The fake answers SelfSubjectAccessReviews from its switchable authorizer, so a test
denies one permission and checks that exactly that one is reported, by name, with
the `kubectl auth can-i` line that reproduces it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner

from extender.checks.permissions import (
    DEFAULT_NAMESPACE,
    Permission,
    can_i_command,
    required_permissions,
)
from extender.checks.preflight import SSAR_PATH, PreflightError, check_permissions, format_missing
from extender.cli.check import check
from extender.kube.client import build_api_client

from . import CONFIG

if TYPE_CHECKING:
    from tests.fakeapi.fixtures import ApiServerHandle

BINDING = Permission("create", "pods", subresource="binding")
EVENTS_PATCH = Permission("patch", "events", "events.k8s.io")
LEASE_UPDATE = Permission("update", "leases", "coordination.k8s.io", namespaced=True)


@pytest.fixture
def server(fake_apiserver: ApiServerHandle) -> ApiServerHandle:
    """A private fake API server (its deny/fail controls are what these tests need)."""
    return fake_apiserver


@pytest.fixture(autouse=True)
def _not_in_a_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)


def reviews(server: ApiServerHandle) -> list[dict]:
    assert server.fake is not None
    return [r.body for r in server.fake.requests_matching("POST", SSAR_PATH + "$")]


# --- check_permissions -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["webhook", "standalone"])
def test_everything_granted(server: ApiServerHandle, mode: str) -> None:
    api = build_api_client(str(server.kubeconfig))
    permissions = required_permissions(mode)
    assert check_permissions(api, permissions, namespace=DEFAULT_NAMESPACE) == []
    sent = reviews(server)
    assert len(sent) == len(permissions), "one review per permission"
    for permission, body in zip(permissions, sent, strict=True):
        assert body["kind"] == "SelfSubjectAccessReview"
        attributes = body["spec"]["resourceAttributes"]
        assert attributes["verb"] == permission.verb
        assert attributes["resource"] == permission.resource
        assert attributes["group"] == permission.group
        assert attributes.get("subresource", "") == permission.subresource
        # Cluster-wide grants are asked for all namespaces; the Lease in ours only.
        assert attributes.get("namespace", "") == (
            DEFAULT_NAMESPACE if permission.namespaced else ""
        )


def test_denied_permissions_are_reported(server: ApiServerHandle) -> None:
    assert server.fake is not None
    server.fake.deny(verb="create", resource="pods", subresource="binding")
    server.fake.deny(verb="patch", resource="events", group="events.k8s.io")
    api = build_api_client(str(server.kubeconfig))
    missing = check_permissions(api, required_permissions("webhook"), namespace=DEFAULT_NAMESPACE)
    assert missing == [BINDING, EVENTS_PATCH]


def test_namespaced_permission_is_checked_in_its_namespace(server: ApiServerHandle) -> None:
    assert server.fake is not None
    server.fake.deny(
        verb="update", resource="leases", group="coordination.k8s.io", namespace="elsewhere"
    )
    api = build_api_client(str(server.kubeconfig))
    standalone = required_permissions("standalone")
    assert check_permissions(api, standalone, namespace=DEFAULT_NAMESPACE) == []
    assert check_permissions(api, standalone, namespace="elsewhere") == [LEASE_UPDATE]
    with pytest.raises(ValueError, match="namespace"):
        check_permissions(api, [LEASE_UPDATE])


@pytest.mark.parametrize(
    ("status", "named"),
    [(403, "system:basic-user"), (500, "create pods/binding")],
    ids=["forbidden-review-not-a-missing-permission", "server-error"],
)
def test_a_failed_review_is_an_error(server: ApiServerHandle, status: int, named: str) -> None:
    assert server.fake is not None
    server.fake.fail_next(status=status, path_regex="selfsubjectaccessreviews")
    api = build_api_client(str(server.kubeconfig))
    with pytest.raises(PreflightError) as caught:
        check_permissions(api, [BINDING])
    assert caught.value.status == status
    assert named in str(caught.value)


def test_unreachable_server_is_an_error(server: ApiServerHandle) -> None:
    assert server.fake is not None
    api = build_api_client(str(server.kubeconfig))
    server.fake.stop()
    with pytest.raises(PreflightError) as caught:
        check_permissions(api, [BINDING], timeout=2)
    assert caught.value.status is None


# --- messages ----------------------------------------------------------------------


def test_can_i_lines() -> None:
    sa = "extender-scheduler"
    assert can_i_command(BINDING, sa, DEFAULT_NAMESPACE) == (
        "kubectl auth can-i create pods --subresource=binding --all-namespaces "
        "--as=system:serviceaccount:scheduler-extender:extender-scheduler"
    )
    assert can_i_command(EVENTS_PATCH, sa, DEFAULT_NAMESPACE) == (
        "kubectl auth can-i patch events.events.k8s.io --all-namespaces "
        "--as=system:serviceaccount:scheduler-extender:extender-scheduler"
    )
    assert can_i_command(LEASE_UPDATE, sa, DEFAULT_NAMESPACE, target_namespace="locks") == (
        "kubectl auth can-i update leases.coordination.k8s.io -n locks "
        "--as=system:serviceaccount:scheduler-extender:extender-scheduler"
    )


def test_format_missing_names_each_permission_and_its_command() -> None:
    missing = [p for p in required_permissions("standalone") if p in (BINDING, LEASE_UPDATE)]
    text = format_missing(missing, "extender-scheduler", DEFAULT_NAMESPACE)
    lines = text.splitlines()
    assert lines[0] == (
        "system:serviceaccount:scheduler-extender:extender-scheduler is missing 2 permissions:"
    )
    assert lines[1] == "  - create pods/binding cluster-wide (needed to bind pods to nodes)"
    assert lines[2] == "      " + can_i_command(BINDING, "extender-scheduler", DEFAULT_NAMESPACE)
    assert lines[3].startswith("  - update leases (coordination.k8s.io) in its namespace")
    assert lines[4] == "      " + can_i_command(
        LEASE_UPDATE, "extender-scheduler", DEFAULT_NAMESPACE
    )
    assert "has every permission" in format_missing([], "x", "y")


# --- extender check ----------------------------------------------------------------


def test_check_cli_all_granted(server: ApiServerHandle) -> None:
    result = CliRunner().invoke(
        check, ["--kubeconfig", str(server.kubeconfig), "--mode", "standalone"]
    )
    assert result.exit_code == 0, result.output
    assert "permissions for standalone mode" in result.output and ": ok" in result.output
    # Out of the cluster it checks the deployed account, by impersonation.
    assert server.fake is not None
    headers = [r.headers for r in server.fake.requests_matching("POST", SSAR_PATH + "$")]
    assert headers and all(
        h.get("impersonate-user") == "system:serviceaccount:scheduler-extender:extender-scheduler"
        for h in headers
    )


def test_check_cli_reports_missing_permissions(server: ApiServerHandle) -> None:
    assert server.fake is not None
    server.fake.deny(verb="create", resource="pods", subresource="binding")
    result = CliRunner().invoke(
        check,
        [
            "--kubeconfig",
            str(server.kubeconfig),
            "--mode",
            "webhook",
            "--service-account",
            "tools:my-extender",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "1 missing" in result.output
    assert (
        "kubectl auth can-i create pods --subresource=binding --all-namespaces "
        "--as=system:serviceaccount:tools:my-extender"
    ) in result.output


def test_check_cli_disable_bind_needs_no_binding(server: ApiServerHandle) -> None:
    assert server.fake is not None
    server.fake.deny(verb="create", resource="pods", subresource="binding")
    server.fake.deny(verb="create", resource="bindings")
    args = ["--kubeconfig", str(server.kubeconfig), "--disable-bind"]
    assert CliRunner().invoke(check, args).exit_code == 0


def test_check_cli_files(tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(
        check, ["--scheduler-config", str(CONFIG / "kube-scheduler-http.yaml"), "--no-cluster"]
    )
    assert good.exit_code == 0, good.output
    assert good.output.strip().endswith("kube-scheduler-http.yaml: ok")

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "extenders:\n- urlPrefix: http://x:8888\n  prioritizeVerb: prioritize\n  weight: 0\n"
    )
    result = runner.invoke(check, ["--scheduler-config", str(bad)])
    assert result.exit_code == 1
    assert "extenders[0].weight: must be > 0 when prioritizeVerb is set" in result.output


def test_check_cli_policy(tmp_path: Path) -> None:
    runner = CliRunner()
    if (CONFIG / "policy.yaml").is_file():
        ok = runner.invoke(check, ["--policy", str(CONFIG / "policy.yaml")])
        assert ok.exit_code == 0, ok.output
    bad = tmp_path / "policy.yaml"
    bad.write_text("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: 3\n")
    result = runner.invoke(check, ["--policy", str(bad)])
    assert result.exit_code == 1
    assert f"policy {bad}: 1 problem" in result.output


def test_check_cli_needs_something_to_check() -> None:
    result = CliRunner().invoke(check, [])
    assert result.exit_code == 2
    assert "nothing to check" in result.output


def test_check_cli_rejects_a_bad_service_account() -> None:
    result = CliRunner().invoke(check, ["--no-cluster", "--service-account", "no-colon"])
    assert result.exit_code == 2
    assert "NAMESPACE:NAME" in result.output
