"""deploy/ renders with `kubectl kustomize`, and what it renders is safe to run.

Checked offline: every overlay builds; every object is valid for the Kubernetes API
schema (the kubernetes client's models refuse unknown fields); Deployments have
replicas, probes on declared ports, resources and a restricted security context;
PDBs, Services and the NetworkPolicy select the pods they are meant for; the
second kube-scheduler's configuration passes our strict checker and points at the
webhook Service; ConfigMaps carry exactly the files in config/.

`kubectl apply --dry-run=client` is not run: even a client-side dry run needs API
discovery from a live server, which this suite does not have.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from extender.checks.configs import check_scheduler_config_text
from extender.checks.permissions import DEFAULT_NAMESPACE

from . import CONFIG, DEPLOY, IMAGE, KUSTOMIZATIONS, find, one, render, validate_strictly

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
EXPECTED_KINDS = {
    "": {
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy",
        "CustomResourceDefinition",
    },
    "overlays/webhook": {
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "CustomResourceDefinition",
    },
    "overlays/standalone": {
        "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "ConfigMap", "Deployment", "PodDisruptionBudget", "CustomResourceDefinition",
    },
}  # fmt: skip
DEPLOYMENTS = {
    "": {"extender-webhook", "extender-kube-scheduler", "extender-scheduler"},
    "overlays/webhook": {"extender-webhook", "extender-kube-scheduler"},
    "overlays/standalone": {"extender-scheduler"},
}


ALL_DEPLOYMENTS = [
    pytest.param(rel, name, id=f"{rel or 'deploy'}:{name}")
    for rel in KUSTOMIZATIONS
    for name in sorted(DEPLOYMENTS[rel])
]


def _deployment(relative: str, name: str) -> dict[str, Any]:
    return one(render(relative), "Deployment", name)


def _container(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def _arg(container: dict[str, Any], flag: str) -> str:
    args = container.get("args") or []
    assert flag in args, f"{container['name']}: {flag} missing from {args}"
    return args[args.index(flag) + 1]


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "only matchLabels selectors are used here"
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


# --- rendering ---------------------------------------------------------------------


@pytest.mark.parametrize("relative", KUSTOMIZATIONS, ids=lambda r: r or "deploy")
def test_renders_expected_kinds(relative: str) -> None:
    docs = render(relative)
    assert {d["kind"] for d in docs} == EXPECTED_KINDS[relative]
    assert {d["metadata"]["name"] for d in find(docs, "Deployment")} == DEPLOYMENTS[relative]
    ids = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs]
    assert len(ids) == len(set(ids)), "duplicate objects"


@pytest.mark.parametrize("relative", KUSTOMIZATIONS, ids=lambda r: r or "deploy")
def test_every_namespaced_object_says_where_it_goes(relative: str) -> None:
    # No kustomize `namespace:` (it would move the kube-system RoleBinding), so every
    # object names its namespace itself.
    for doc in render(relative):
        namespace = doc["metadata"].get("namespace")
        if doc["kind"] in CLUSTER_SCOPED:
            assert namespace is None, doc["metadata"]["name"]
        elif doc["kind"] == "RoleBinding" and doc["roleRef"]["name"] == (
            "extension-apiserver-authentication-reader"
        ):
            assert namespace == "kube-system"
        else:
            assert namespace == DEFAULT_NAMESPACE, f"{doc['kind']} {doc['metadata']['name']}"


@pytest.mark.parametrize("relative", KUSTOMIZATIONS, ids=lambda r: r or "deploy")
def test_objects_match_the_kubernetes_schema(relative: str) -> None:
    """The kubernetes client's models (pydantic, extra fields forbidden) as an offline schema."""
    validate_strictly(render(relative))


# --- Deployments -------------------------------------------------------------------


@pytest.mark.parametrize(("relative", "name"), ALL_DEPLOYMENTS)
def test_deployment_is_highly_available(relative: str, name: str) -> None:
    deployment = _deployment(relative, name)
    assert deployment["spec"]["replicas"] == 2
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _selects(deployment["spec"]["selector"], pod_labels)
    pdbs = [
        p
        for p in find(render(relative), "PodDisruptionBudget")
        if _selects(p["spec"]["selector"], pod_labels)
    ]
    assert len(pdbs) == 1, f"{name}: expected one PodDisruptionBudget"
    assert pdbs[0]["spec"]["minAvailable"] == 1
    spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread[0]["topologyKey"] == "kubernetes.io/hostname"


@pytest.mark.parametrize(("relative", "name"), ALL_DEPLOYMENTS)
def test_deployment_is_locked_down(relative: str, name: str) -> None:
    pod = _deployment(relative, name)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = _container({"spec": {"template": {"spec": pod}}})
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security.get("privileged", False) is False
    assert container["resources"]["requests"]["cpu"]
    assert container["resources"]["requests"]["memory"]
    assert container["resources"]["limits"]["memory"]
    assert not pod.get("hostNetwork") and not pod.get("hostPID")


@pytest.mark.parametrize(("relative", "name"), ALL_DEPLOYMENTS)
def test_probes_use_declared_ports(relative: str, name: str) -> None:
    container = _container(_deployment(relative, name))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path, f"{name} {probe}"
        assert get["port"] in ports or get["port"] in ports.values()


@pytest.mark.parametrize(("relative", "name"), ALL_DEPLOYMENTS)
def test_images(relative: str, name: str) -> None:
    image = _container(_deployment(relative, name))["image"]
    if name == "extender-kube-scheduler":
        assert image.startswith("registry.k8s.io/kube-scheduler:v1.36.")
    else:
        assert image == IMAGE


@pytest.mark.parametrize(("relative", "name"), ALL_DEPLOYMENTS)
def test_mounted_files_exist(relative: str, name: str) -> None:
    """Every file a flag points at is a key of the ConfigMap mounted there."""
    docs = render(relative)
    deployment = _deployment(relative, name)
    container = _container(deployment)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    files: dict[str, str] = {}
    for mount in container["volumeMounts"]:
        volume = volumes[mount["name"]]
        if "configMap" in volume:
            (config_map,) = [
                c
                for c in find(docs, "ConfigMap")
                if c["metadata"]["name"] == volume["configMap"]["name"]
            ]
            for key, text in config_map["data"].items():
                files[f"{mount['mountPath']}/{key}"] = text
    wanted = [
        a.split("=", 1)[1] if "=" in a else a
        for a in container.get("args", []) + container.get("command", [])
    ]
    referenced = [w for w in wanted if w.startswith("/etc/")]
    assert referenced, f"{name} reads no mounted file?"
    for path in referenced:
        assert path in files, f"{name}: {path} is not in a mounted ConfigMap ({sorted(files)})"


def test_webhook_container() -> None:
    container = _container(_deployment("overlays/webhook", "extender-webhook"))
    assert container["args"][0] == "serve"
    assert _arg(container, "--bind") == "0.0.0.0:8888"
    assert _arg(container, "--source") == "kube"
    assert _arg(container, "--policy") == "/etc/extender/policy-webhook.yaml"
    assert "--enable-bind" in container["args"]
    assert [p["containerPort"] for p in container["ports"]] == [8888]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/metrics"
    deployment = _deployment("overlays/webhook", "extender-webhook")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    tmp = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
    assert tmp and "emptyDir" in volumes[tmp[0]["name"]], "a writable /tmp for gunicorn and metrics"
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_standalone_container() -> None:
    container = _container(_deployment("overlays/standalone", "extender-scheduler"))
    assert container["args"][0] == "schedule"
    assert _arg(container, "--scheduler-name") == "extender-scheduler"
    assert _arg(container, "--policy") == "/etc/extender/policy.yaml"
    assert _arg(container, "--lease-name") == "extender-scheduler"
    assert "--leader-elect" in container["args"] and "--no-leader-elect" not in container["args"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # `extender schedule` serves /metrics, /healthz and /readyz on the one --metrics-bind port.
    assert int(_arg(container, "--metrics-bind").rsplit(":", 1)[1]) == ports["http"] == 10251
    assert "--health-bind" not in container["args"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["port"] == "http"


# --- Service and NetworkPolicy -------------------------------------------------------


def test_service_reaches_the_webhook() -> None:
    docs = render("overlays/webhook")
    service = one(docs, "Service", "extender-webhook")
    pod_labels = _deployment("overlays/webhook", "extender-webhook")["spec"]["template"][
        "metadata"
    ]["labels"]
    assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    (port,) = service["spec"]["ports"]
    assert port["port"] == 8888 and port["targetPort"] == "http"


def test_network_policy_admits_only_schedulers() -> None:
    docs = render("overlays/webhook")
    (policy,) = find(docs, "NetworkPolicy")
    webhook_labels = _deployment("overlays/webhook", "extender-webhook")["spec"]["template"][
        "metadata"
    ]["labels"]
    scheduler_labels = _deployment("overlays/webhook", "extender-kube-scheduler")["spec"][
        "template"
    ]["metadata"]["labels"]
    assert _selects(policy["spec"]["podSelector"], webhook_labels)
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8888}]
    peers = rule["from"]
    assert all("ipBlock" not in peer for peer in peers), "no address-based holes"
    same_namespace = [p for p in peers if "namespaceSelector" not in p]
    assert [p["podSelector"] for p in same_namespace] == [
        {"matchLabels": {"app.kubernetes.io/name": "extender-kube-scheduler"}}
    ]
    assert _selects(same_namespace[0]["podSelector"], scheduler_labels)
    assert not _selects(same_namespace[0]["podSelector"], webhook_labels)
    control_plane = [p for p in peers if "namespaceSelector" in p]
    assert control_plane == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"component": "kube-scheduler"}},
        }
    ]


# --- the second kube-scheduler ---------------------------------------------------------


def _scheduler_config() -> dict[str, Any]:
    (config_map,) = find(render("overlays/webhook"), "ConfigMap", "extender-kube-scheduler-config")
    return config_map["data"]


def test_second_scheduler_config_passes_the_checker() -> None:
    (text,) = _scheduler_config().values()
    assert check_scheduler_config_text(text) == []


def test_second_scheduler_calls_our_webhook() -> None:
    (text,) = _scheduler_config().values()
    config = yaml.safe_load(text)
    assert [p["schedulerName"] for p in config["profiles"]] == ["extender-kube-scheduler"]
    election = config["leaderElection"]
    assert election["leaderElect"] is True
    assert election["resourceName"] == "extender-kube-scheduler"
    assert election["resourceNamespace"] == DEFAULT_NAMESPACE
    (extender,) = config["extenders"]
    assert extender["urlPrefix"] == f"http://extender-webhook.{DEFAULT_NAMESPACE}.svc:8888"
    assert extender["nodeCacheCapable"] is True
    assert extender["bindVerb"] == "bind"
    # The webhook must accept binds for this scheduler's pods.
    webhook = _container(_deployment("overlays/webhook", "extender-webhook"))
    names = [
        webhook["args"][i + 1] for i, a in enumerate(webhook["args"]) if a == "--scheduler-name"
    ]
    assert "extender-kube-scheduler" in names


def test_second_scheduler_rbac() -> None:
    docs = render("overlays/webhook")
    subject = {
        "kind": "ServiceAccount",
        "name": "extender-kube-scheduler",
        "namespace": DEFAULT_NAMESPACE,
    }
    cluster_roles = {
        b["roleRef"]["name"] for b in find(docs, "ClusterRoleBinding") if subject in b["subjects"]
    }
    assert cluster_roles == {"system:kube-scheduler", "system:volume-scheduler"}
    role_bindings = {
        (b["metadata"]["namespace"], b["roleRef"]["name"])
        for b in find(docs, "RoleBinding")
        if subject in b["subjects"]
    }
    assert ("kube-system", "extension-apiserver-authentication-reader") in role_bindings
    # Its own lease: system:kube-scheduler only covers the lease named kube-scheduler.
    lease_role = one(docs, "Role", "extender-kube-scheduler-leader-election")
    assert (DEFAULT_NAMESPACE, lease_role["metadata"]["name"]) in role_bindings
    by_verb = {v: r.get("resourceNames") for r in lease_role["rules"] for v in r["verbs"]}
    assert by_verb == {
        "create": None,
        "get": ["extender-kube-scheduler"],
        "update": ["extender-kube-scheduler"],
    }
    deployment = _deployment("overlays/webhook", "extender-kube-scheduler")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "extender-kube-scheduler"


# --- ConfigMaps carry config/ -----------------------------------------------------------


@pytest.mark.parametrize("name", ["policy.yaml", "policy-webhook.yaml"])
def test_policy_copies_equal_config(name: str) -> None:
    """deploy/base keeps copies (kustomize cannot read ../../config); they must not drift."""
    assert (DEPLOY / "base" / name).read_text() == (CONFIG / name).read_text(), (
        f"deploy/base/{name} differs from config/{name}: cp config/{name} deploy/base/{name}"
    )


@pytest.mark.parametrize("relative", KUSTOMIZATIONS, ids=lambda r: r or "deploy")
def test_policy_config_map_holds_both_policies(relative: str) -> None:
    (config_map,) = find(render(relative), "ConfigMap", "extender-policy")
    assert config_map["metadata"]["name"] != "extender-policy", (
        "hash suffix: a change rolls the pods"
    )
    assert config_map["data"] == {
        "policy.yaml": (CONFIG / "policy.yaml").read_text(),
        "policy-webhook.yaml": (CONFIG / "policy-webhook.yaml").read_text(),
    }


@pytest.mark.parametrize("name", ["policy.yaml", "policy-webhook.yaml"])
def test_deployed_policies_load(name: str) -> None:
    from extender.checks.configs import check_policy

    assert check_policy(DEPLOY / "base" / name) == []
