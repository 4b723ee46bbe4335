"""The Helm chart installs what deploy/ installs, and its options do what they say.

Offline, with `helm lint` and `helm template`: in each mode (webhook, standalone, both) the
chart renders the objects of the matching kustomization with the same names, RBAC rules and
bindings, Services, PDBs, NetworkPolicy, pod specs and kube-scheduler configuration (only
the arguments may add options, set to the CLI's defaults); TLS and mutual TLS, generated or
from existing Secrets, wire the webhook, the second kube-scheduler and the `helm test` pod to
the same files; the schema and the chart's own checks refuse bad values with one line.
`helm install` into a real API server is in tests/e2e/test_helm_install.py.
"""

from __future__ import annotations

import datetime
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from extender.checks.configs import check_policy, check_scheduler_config_text
from extender.checks.permissions import DEFAULT_NAMESPACE, SERVICE_ACCOUNTS

from . import CONFIG, ROOT, find, one, render, validate_strictly
from .charts import CHART, MODES, RELEASE, helm, merge, run_helm, template

RBAC_KINDS = ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
#: ConfigMaps kustomize generates with a content-hash suffix; the chart rolls pods by checksum.
GENERATED = ("extender-policy", "extender-kube-scheduler-config")
MTLS = {"webhook": {"tls": {"enabled": True, "clientAuth": True}}}
#: Options the chart passes that deploy/ leaves to their defaults, with the value that must be
#: that default (checked against the click commands below).
EXTRA_ARGS = {
    "extender-webhook": {("--log-level", "INFO")},
    "extender-scheduler": {
        ("--service-account", f"{DEFAULT_NAMESPACE}:{SERVICE_ACCOUNTS['standalone']}"),
        ("--percentage-of-nodes-to-score", "0"),
        ("--parallel-binds", "16"),
        ("--log-format", "text"),
        ("--log-level", "INFO"),
    },
}
MODE_IDS = sorted(MODES)


def _unhash(name: str) -> str:
    for generated in GENERATED:
        if name.startswith(generated + "-"):
            return generated
    return name


def _key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return (doc["kind"], doc["metadata"].get("namespace", ""), _unhash(doc["metadata"]["name"]))


def _by_key(docs: list[dict[str, Any]], kinds: tuple[str, ...] | None = None) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {_key(d): d for d in docs if kinds is None or d["kind"] in kinds}


def _options(args: list[str]) -> list[tuple[str, str | None]]:
    """`[cmd, --a, 1, --flag]` as [(cmd, None), (--a, 1), (--flag, None)]."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        if args[i].startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append((args[i], args[i + 1]))
            i += 2
        else:
            out.append((args[i], None))
            i += 1
    return out


def _pod_spec(deployment: dict[str, Any]) -> dict[str, Any]:
    """The pod spec without the container arguments, generated ConfigMap names unhashed."""
    spec = dict(deployment["spec"]["template"]["spec"])
    spec["containers"] = [{k: v for k, v in c.items() if k not in ("args",)} for c in spec["containers"]]
    spec["volumes"] = [
        {**v, "configMap": {**v["configMap"], "name": _unhash(v["configMap"]["name"])}} if "configMap" in v else v
        for v in spec["volumes"]
    ]
    return spec


def _container(docs: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    (container,) = one(docs, "Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    return container


def _kube_scheduler_config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (text,) = one(docs, "ConfigMap", "extender-kube-scheduler-config")["data"].values()
    return dict(yaml.safe_load(text))


def _secret_keys(docs: list[dict[str, Any]], volume: dict[str, Any], existing: dict[str, set[str]]) -> set[str]:
    """The keys of the Secret a volume mounts: rendered, or one of the `existing` ones."""
    name = volume["secret"]["secretName"]
    rendered = find(docs, "Secret", name)
    return set(rendered[0]["data"]) if rendered else existing[name]


# --- lint and modes ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", [*MODE_IDS, "mtls"])
def test_helm_lint(mode: str) -> None:
    values = MTLS if mode == "mtls" else MODES[mode][0]
    result = run_helm("lint", "--strict", str(CHART), values=values)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("mode", MODE_IDS)
def test_renders_the_objects_of_deploy(mode: str) -> None:
    values, overlay = MODES[mode]
    chart = set(_by_key(template(values)))
    kustomize = set(_by_key(render(overlay)))
    # The namespace is Helm's (--create-namespace), not the chart's: Helm does not own it.
    assert chart == kustomize - {("Namespace", "", DEFAULT_NAMESPACE)}


@pytest.mark.parametrize("mode", MODE_IDS)
def test_the_podgroup_crd_is_deploys(mode: str) -> None:
    """Coscheduling's PodGroup CRD, as deploy/ has it, unless podGroupCRD.install is false."""
    values, overlay = MODES[mode]
    kustomize = find(render(overlay), "CustomResourceDefinition")
    assert kustomize and find(template(values), "CustomResourceDefinition") == kustomize
    assert not find(template(merge(values, {"podGroupCRD": {"install": False}})), "CustomResourceDefinition")


@pytest.mark.parametrize("mode", MODE_IDS)
def test_rbac_is_deploys_exactly(mode: str) -> None:
    """One source of truth: the same Roles (rules) and bindings (role, subjects) as deploy/."""
    values, overlay = MODES[mode]
    chart = _by_key(template(values), RBAC_KINDS)
    kustomize = _by_key(render(overlay), RBAC_KINDS)
    assert sorted(chart) == sorted(kustomize)
    for key, doc in kustomize.items():
        if doc["kind"] in ("ClusterRole", "Role"):
            assert chart[key]["rules"] == doc["rules"], f"{key}: rules differ from deploy/"
        else:
            assert chart[key]["roleRef"] == doc["roleRef"], f"{key}: roleRef differs from deploy/"
            assert chart[key]["subjects"] == doc["subjects"], f"{key}: subjects differ from deploy/"


def test_rbac_comparison_notices_a_changed_rule() -> None:
    """The comparison above fails on a rule that differs (it compares the rules, not names)."""
    chart = _by_key(template(MODES["webhook"][0]), RBAC_KINDS)
    kustomize = _by_key(render("overlays/webhook"), RBAC_KINDS)
    key = ("ClusterRole", "", "scheduler-extender-webhook")
    assert chart[key]["rules"] == kustomize[key]["rules"]
    chart[key]["rules"][0]["verbs"].append("delete")
    assert chart[key]["rules"] != kustomize[key]["rules"]


@pytest.mark.parametrize("mode", MODE_IDS)
def test_services_budgets_and_network_policy_are_deploys(mode: str) -> None:
    values, overlay = MODES[mode]
    chart = _by_key(template(merge(values, {"tests": {"enabled": False}})))
    for key, doc in _by_key(render(overlay), ("Service", "PodDisruptionBudget", "NetworkPolicy")).items():
        assert chart[key]["spec"] == doc["spec"], f"{key} differs from deploy/"


def _deployments(mode: str) -> list[tuple[str, list[dict[str, Any]], dict[str, Any]]]:
    """deploy/'s Deployments in ``mode``, each as (name, the chart's documents for the mode's
    values, deploy/'s Deployment)."""
    values, overlay = MODES[mode]
    chart = template(values)
    deployments = find(render(overlay), "Deployment")
    assert deployments, f"deploy/{overlay} renders no Deployment"
    return [(d["metadata"]["name"], chart, d) for d in deployments]


@pytest.mark.parametrize("mode", MODE_IDS)
def test_pod_specs_are_deploys(mode: str) -> None:
    """Same image, probes, ports, env, resources, security contexts, mounts and volumes."""
    for name, chart, deployment in _deployments(mode):
        mine = one(chart, "Deployment", name)
        assert _pod_spec(mine) == _pod_spec(deployment), f"{name}: pod spec differs from deploy/"
        for field in ("replicas", "selector", "strategy", "revisionHistoryLimit"):
            assert mine["spec"].get(field) == deployment["spec"].get(field), f"{name}: {field}"
        labels = mine["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["template"]["metadata"]["labels"].items() <= labels.items()


@pytest.mark.parametrize("mode", MODE_IDS)
def test_arguments_are_deploys_plus_defaults(mode: str) -> None:
    for name, chart, deployment in _deployments(mode):
        (theirs,) = deployment["spec"]["template"]["spec"]["containers"]
        ours = _container(chart, name)
        if "args" not in theirs:  # kube-scheduler: a command, compared with the pod spec
            assert "args" not in ours
            continue
        mine, deploys = _options(ours["args"]), _options(theirs["args"])
        assert [o for o in mine if o in deploys] == deploys, f"{name}: deploy/'s arguments, in order"
        assert {o for o in mine if o not in deploys} == EXTRA_ARGS[name]


def test_extra_arguments_are_the_cli_defaults() -> None:
    """What the chart adds to deploy/'s arguments changes nothing: each is the default."""
    from extender.cli.schedule import schedule
    from extender.cli.serve import serve

    commands = {"extender-webhook": serve, "extender-scheduler": schedule}
    implied = {"--service-account": f"{DEFAULT_NAMESPACE}:{SERVICE_ACCOUNTS['standalone']}"}
    for name, extras in EXTRA_ARGS.items():
        params = {opt: p for p in commands[name].params for opt in p.opts}
        for flag, value in extras:
            default = params[flag].default
            assert (implied[flag] if default is None else str(default)) == value, f"{name} {flag}"


def test_second_scheduler_configuration_is_deploys() -> None:
    assert _kube_scheduler_config(template()) == _kube_scheduler_config(render("overlays/webhook"))


def test_policies_are_config_files() -> None:
    (config_map,) = find(template(), "ConfigMap", "extender-policy")
    assert config_map["data"] == {
        "policy.yaml": (CONFIG / "policy.yaml").read_text(),
        "policy-webhook.yaml": (CONFIG / "policy-webhook.yaml").read_text(),
    }


@pytest.mark.parametrize("name", sorted(p.name for p in (CHART / "files").glob("*.yaml")))
def test_chart_policy_copies_equal_config(name: str) -> None:
    """files/ keeps copies (Helm cannot read ../../config); they must not drift."""
    assert (CHART / "files" / name).read_text() == (CONFIG / name).read_text(), (
        f"deploy/helm/scheduler-extender/files/{name} differs from config/{name}: "
        f"cp config/{name} deploy/helm/scheduler-extender/files/{name}"
    )


VARIANTS = {
    **{mode: values for mode, (values, _) in MODES.items()},
    "mtls": MTLS,
    "existing-secret": {"webhook": {"tls": {"enabled": True, "existingSecret": "webhook-cert"}}},
    "node-port": {"webhook": {"service": {"type": "NodePort", "nodePort": 30888}, "bind": False}},
    "devices": {"policy": {"preset": "devices"}},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_objects_match_the_kubernetes_schema(variant: str) -> None:
    """The kubernetes client's models (extra fields forbidden) as an offline schema, as for
    deploy/ in test_kustomize.py; tests/e2e/test_helm_install.py has the API server's word."""
    validate_strictly(template(VARIANTS[variant], tests=True))


# --- options -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("preset", "webhook", "standalone"),
    [
        ("devices", "policy-webhook-devices.yaml", "policy-devices.yaml"),
        ("load-aware", "policy-load-aware.yaml", "policy-load-aware.yaml"),
    ],
)
def test_policy_presets(preset: str, webhook: str, standalone: str, tmp_path: Path) -> None:
    docs = template({"policy": {"preset": preset}})
    data = one(docs, "ConfigMap", "extender-policy")["data"]
    assert data == {"policy-webhook.yaml": (CONFIG / webhook).read_text(),
                    "policy.yaml": (CONFIG / standalone).read_text()}  # fmt: skip
    for key, text in data.items():
        (tmp_path / key).write_text(text)
        assert check_policy(tmp_path / key) == []
    text = one(docs, "ConfigMap", "extender-kube-scheduler-config")["data"]["kube-scheduler-config.yaml"]
    assert check_scheduler_config_text(text) == []
    profile = _kube_scheduler_config(docs)["profiles"][0]
    if preset == "devices":  # docs/devices.md: a scheduler sending every pod leaves the GPUs to us
        assert profile["pluginConfig"] == [
            {"name": "NodeResourcesFit", "args": {"ignoredResourceGroups": ["extender.example"]}}
        ]
    else:
        assert "pluginConfig" not in profile


def test_inline_policy_and_its_checksum() -> None:
    text = (CONFIG / "policy-webhook-devices.yaml").read_text()
    default, inline = template(), template({"policy": {"webhook": text}})
    assert one(inline, "ConfigMap", "extender-policy")["data"]["policy-webhook.yaml"] == text

    def checksum(docs: list[dict[str, Any]]) -> str:
        return one(docs, "Deployment", "extender-webhook")["spec"]["template"]["metadata"]["annotations"]["checksum/policy"]

    assert checksum(default) != checksum(inline), "a policy change rolls the pods"


def test_existing_config_map() -> None:
    docs = template({"policy": {"existingConfigMap": "my-policies"}})
    assert not find(docs, "ConfigMap", "extender-policy")
    for name in ("extender-webhook", "extender-scheduler"):
        volumes = one(docs, "Deployment", name)["spec"]["template"]["spec"]["volumes"]
        assert {"name": "policy", "configMap": {"name": "my-policies"}} in volumes


def test_webhook_without_bind() -> None:
    docs = template({"webhook": {"bind": False}})
    args = _container(docs, "extender-webhook")["args"]
    assert "--disable-bind" in args and "--enable-bind" not in args
    assert "bindVerb" not in _kube_scheduler_config(docs)["extenders"][0]
    assert not find(docs, "Role", "scheduler-extender-webhook-device-ledger")
    rules = one(docs, "ClusterRole", "scheduler-extender-webhook")["rules"]
    assert not [r for r in rules if "pods/binding" in r["resources"]]


def test_webhook_for_the_control_plane_scheduler() -> None:
    """Webhook only (no second scheduler): /bind serves default-scheduler; a NodePort."""
    docs = template({"standalone": {"enabled": False}, "kubeScheduler": {"enabled": False},
                     "webhook": {"service": {"type": "NodePort", "nodePort": 30888}}})  # fmt: skip
    assert {d["metadata"]["name"] for d in find(docs, "Deployment")} == {"extender-webhook"}
    options = _options(_container(docs, "extender-webhook")["args"])
    assert ("--scheduler-name", "default-scheduler") in options
    service = one(docs, "Service", "extender-webhook")
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 8888, "targetPort": "http", "protocol": "TCP", "nodePort": 30888}
    ]


def test_placement_host_network_and_extra_volumes() -> None:
    volume = {"name": "prometheus-ca", "configMap": {"name": "prometheus-ca"}}
    mount = {"name": "prometheus-ca", "mountPath": "/etc/prometheus-ca", "readOnly": True}
    placement = {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                 "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                 "priorityClassName": "system-cluster-critical"}  # fmt: skip
    docs = template({"webhook": {"hostNetwork": True, **placement}, "kubeScheduler": placement,
                     "extraVolumes": [volume], "extraVolumeMounts": [mount]})  # fmt: skip
    pod = one(docs, "Deployment", "extender-webhook")["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    for name in ("extender-webhook", "extender-kube-scheduler"):
        spec = one(docs, "Deployment", name)["spec"]["template"]["spec"]
        assert placement.items() <= spec.items()
    assert "nodeSelector" not in one(docs, "Deployment", "extender-scheduler")["spec"]["template"]["spec"]
    for name in ("extender-webhook", "extender-scheduler"):
        spec = one(docs, "Deployment", name)["spec"]["template"]["spec"]
        assert volume in spec["volumes"] and mount in spec["containers"][0]["volumeMounts"]


def test_second_scheduler_for_a_webhook_elsewhere() -> None:
    url = "https://extender.example.internal:8888"
    docs = template({"webhook": {"enabled": False, "tls": {"enabled": True, "existingSecret": "their-ca"}},
                     "standalone": {"enabled": False},
                     "kubeScheduler": {"extender": {"urlPrefix": url, "serverName": "extender.example.internal"}}})  # fmt: skip
    assert {d["metadata"]["name"] for d in find(docs, "Deployment")} == {"extender-kube-scheduler"}
    (extender,) = _kube_scheduler_config(docs)["extenders"]
    assert extender["urlPrefix"] == url and extender["tlsConfig"]["caFile"].endswith("/ca.crt")
    assert extender["tlsConfig"]["serverName"] == "extender.example.internal"
    volumes = one(docs, "Deployment", "extender-kube-scheduler")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "extender-tls", "secret": {"secretName": "their-ca"}} in volumes
    assert not find(docs, "Secret") and not find(docs, "ConfigMap", "extender-policy")


def test_standalone_options() -> None:
    docs = template({"standalone": {"leaderElect": False, "disablePreemption": True, "parallelBinds": 4,
                                    "schedulerName": "batch"}})  # fmt: skip
    args = _container(docs, "extender-scheduler")["args"]
    options = _options(args)
    assert "--no-leader-elect" in args and "--leader-elect" not in args
    assert "--disable-preemption" in args
    assert ("--parallel-binds", "4") in options and ("--scheduler-name", "batch") in options


def test_service_monitor_and_pod_monitor() -> None:
    docs = template(merge(MTLS, {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "kps"}}}}))
    monitor = one(docs, "ServiceMonitor", "extender-webhook")
    assert monitor["metadata"]["labels"]["release"] == "kps"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics" and endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["keySecret"] == {"name": "extender-kube-scheduler-client", "key": "tls.key"}
    pod_monitor = one(docs, "PodMonitor", "extender-scheduler")
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "http"
    assert not find(template(), "ServiceMonitor")


def test_every_pod_is_locked_down() -> None:
    docs = template(MTLS, tests=True)
    pods = [d["spec"]["template"]["spec"] for d in find(docs, "Deployment")] + [one(docs, "Pod", "extender-webhook-test")["spec"]]
    assert len(pods) == 4
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 65532
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not pod.get("hostNetwork")
        for container in pod["containers"]:
            assert container["securityContext"] == {
                "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                "privileged": False, "capabilities": {"drop": ["ALL"]},
            }  # fmt: skip
            assert container["resources"]["limits"]["memory"]


# --- TLS ---------------------------------------------------------------------------------


def _load_certificates(secret: dict[str, Any]) -> tuple[Any, Any]:
    import base64

    from cryptography import x509

    def load(key: str) -> Any:
        return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))

    return load("tls.crt"), load("ca.crt")


def test_generated_mtls_certificates() -> None:
    from cryptography import x509
    from cryptography.x509.oid import ExtendedKeyUsageOID

    docs = template(MTLS)
    server, ca = _load_certificates(one(docs, "Secret", "extender-webhook-tls"))
    client, client_ca = _load_certificates(one(docs, "Secret", "extender-kube-scheduler-client"))
    assert ca == client_ca
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"extender-webhook.{DEFAULT_NAMESPACE}.svc" in names
    for leaf in (server, client):
        leaf.verify_directly_issued_by(ca)
        assert leaf.not_valid_after_utc > datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=300)
    usages = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usages, "OpenSSL refuses a client certificate without it"
    assert ca.subject != server.subject


@pytest.mark.parametrize(
    ("values", "existing"),
    [
        pytest.param(MTLS, {}, id="generated"),
        pytest.param(merge(MTLS, {"webhook": {"tls": {"existingSecret": "webhook-cert", "existingClientSecret": "caller-cert"}}}),
                     {"webhook-cert": {"tls.crt", "tls.key", "ca.crt"}, "caller-cert": {"tls.crt", "tls.key", "ca.crt"}},
                     id="existing-secrets"),
    ],
)  # fmt: skip
def test_mtls_wires_every_file(values: dict[str, Any], existing: dict[str, set[str]]) -> None:
    """Each TLS file a flag, probe or kube-scheduler setting names is a key of a mounted Secret."""
    docs = template(values, tests=True)
    if existing:
        assert not find(docs, "Secret"), "nothing generated with existing Secrets"

    def mounted_files(pod: dict[str, Any], container: dict[str, Any]) -> set[str]:
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        return {
            f"{m['mountPath']}/{key}"
            for m in container.get("volumeMounts", [])
            if "secret" in volumes[m["name"]]
            for key in _secret_keys(docs, volumes[m["name"]], existing)
        }

    webhook_pod = one(docs, "Deployment", "extender-webhook")["spec"]["template"]["spec"]
    webhook = webhook_pod["containers"][0]
    options = dict(o for o in _options(webhook["args"]) if o[1] is not None)
    files = mounted_files(webhook_pod, webhook)
    assert {options["--tls-cert"], options["--tls-key"], options["--client-ca"]} <= files
    # The kubelet's httpGet probes present no client certificate: none under mutual TLS.
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert "httpGet" not in webhook[probe]
    readiness = webhook["readinessProbe"]["exec"]["command"][-1]
    assert all(path in readiness for path in (options["--tls-cert"], options["--tls-key"]))

    scheduler_pod = one(docs, "Deployment", "extender-kube-scheduler")["spec"]["template"]["spec"]
    (extender,) = _kube_scheduler_config(docs)["extenders"]
    assert extender["urlPrefix"] == f"https://extender-webhook.{DEFAULT_NAMESPACE}.svc:8888"
    assert extender["enableHTTPS"] is True
    tls = extender["tlsConfig"]
    assert tls["serverName"] == f"extender-webhook.{DEFAULT_NAMESPACE}.svc"
    assert {tls["caFile"], tls["certFile"], tls["keyFile"]} <= mounted_files(scheduler_pod, scheduler_pod["containers"][0])
    text = one(docs, "ConfigMap", "extender-kube-scheduler-config")["data"]["kube-scheduler-config.yaml"]
    assert check_scheduler_config_text(text) == []

    test_pod = one(docs, "Pod", "extender-webhook-test")["spec"]
    script = test_pod["containers"][0]["command"][-1]
    assert f"https://extender-webhook.{DEFAULT_NAMESPACE}.svc:8888/readyz" in script
    test_files = mounted_files(test_pod, test_pod["containers"][0])
    assert {"/etc/extender-tls/ca.crt", "/etc/extender-tls/tls.crt", "/etc/extender-tls/tls.key"} <= test_files
    assert all(f in script for f in ("/etc/extender-tls/ca.crt", "/etc/extender-tls/tls.crt"))


def test_tls_without_client_auth() -> None:
    docs = template({"webhook": {"tls": {"enabled": True}}})
    webhook = _container(docs, "extender-webhook")
    assert "--tls-cert" in webhook["args"] and "--client-ca" not in webhook["args"]
    assert webhook["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"
    tls = _kube_scheduler_config(docs)["extenders"][0]["tlsConfig"]
    assert set(tls) == {"serverName", "caFile"}


def test_plain_http_test_pod() -> None:
    docs = template(tests=True)
    pod = one(docs, "Pod", "extender-webhook-test")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    script = pod["spec"]["containers"][0]["command"][-1]
    service = one(docs, "Service", "extender-webhook")
    assert f"http://{service['metadata']['name']}.{DEFAULT_NAMESPACE}.svc:{service['spec']['ports'][0]['port']}/readyz" in script
    # The NetworkPolicy lets it in.
    peers = one(docs, "NetworkPolicy", "extender-webhook")["spec"]["ingress"][0]["from"]
    assert {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "extender-webhook-test"}}} in peers
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "extender-webhook-test"


def test_other_namespace_follows_the_release() -> None:
    docs = template(namespace="sched")
    subjects = {s["namespace"] for d in docs if d["kind"].endswith("Binding") for s in d["subjects"]}
    assert subjects == {"sched"}
    assert _kube_scheduler_config(docs)["extenders"][0]["urlPrefix"] == "http://extender-webhook.sched.svc:8888"
    options = _options(_container(docs, "extender-scheduler")["args"])
    assert ("--lease-namespace", "sched") in options and ("--service-account", "sched:extender-scheduler") in options
    namespaces = {d["metadata"].get("namespace") for d in docs}
    assert namespaces == {None, "sched", "kube-system"}


# --- refusals ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"webhook": {"replicas": -1}}, "minimum"),
        ({"webhook": {"replica": 2}}, "additional properties 'replica' not allowed"),
        ({"policy": {"preset": "fast"}}, "preset"),
        ({"webhook": {"service": {"type": "LoadBalancer"}}}, "type"),
        ({"webhook": {"tls": {"enabled": "yes"}}}, "enabled"),
        ({"kubeScheduler": {"extender": {"httpTimeout": "3 seconds"}}}, "httpTimeout"),
        ({"standalone": {"percentageOfNodesToScore": 150}}, "percentageOfNodesToScore"),
        ({"image": {"digest": "latest"}}, "digest"),
        ({"webhook": {"tls": {"clientAuth": True}}}, "webhook.tls.clientAuth (mutual TLS) needs webhook.tls.enabled"),
        ({"webhook": {"enabled": False}, "kubeScheduler": {"enabled": False}, "standalone": {"enabled": False}},
         "nothing to install"),
        ({"webhook": {"enabled": False}}, "set kubeScheduler.extender.urlPrefix"),
        ({"webhook": {"service": {"nodePort": 30888}}}, "webhook.service.type is not NodePort"),
        ({"policy": {"preset": "devices"}, "webhook": {"bind": False}}, "needs webhook.bind"),
    ],
)  # fmt: skip
def test_bad_values_are_refused_in_one_line(values: dict[str, Any], message: str) -> None:
    result = run_helm("template", RELEASE, str(CHART), "-n", DEFAULT_NAMESPACE, values=values)
    assert result.returncode != 0, f"accepted: {values}"
    assert message in result.stderr, result.stderr
    assert "panic" not in result.stderr and "goroutine" not in result.stderr


def render_notes(tmp_path: Path, *sets: str) -> str:
    """NOTES.txt as `helm install` prints it. `helm install --dry-run` still asks a cluster for
    its version, so a copy of the chart renders the same text through `tpl` as a manifest."""
    import shutil

    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "notes-source.txt")
    (chart / "templates" / "notes-as-manifest.yaml").write_text(
        'notes: {{ tpl (.Files.Get "notes-source.txt") . | toJson }}\n'
    )
    args = [helm(), "template", RELEASE, str(chart), "-n", DEFAULT_NAMESPACE,
            "--show-only", "templates/notes-as-manifest.yaml"]
    for option in sets:
        args += ["--set", option]
    result = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return str(yaml.safe_load(result.stdout)["notes"])


def test_notes_say_how_to_register_with_the_control_plane_scheduler(tmp_path: Path) -> None:
    notes = render_notes(tmp_path, "webhook.tls.enabled=true")
    for needle in (
        "static pod on the host network",
        "get service extender-webhook -o jsonpath='{.spec.clusterIP}'",
        "webhook.service.type=NodePort",
        "webhook.hostNetwork=true",
        "--config=/etc/kubernetes/scheduler-extender.yaml",
        "serverName: extender-webhook.scheduler-extender.svc",
        "helm test scheduler-extender -n scheduler-extender",
    ):
        assert needle in notes, needle
    # The snippet's extender entry is one kube-scheduler accepts.
    snippet = notes.split("/etc/kubernetes/scheduler-extender.yaml:\n", 1)[1].split("    and in ", 1)[0]
    config = yaml.safe_load(snippet.replace("<address from a, b or c>:<port>", "10.96.0.10:8888"))
    assert check_scheduler_config_text(yaml.safe_dump(config)) == []


def test_test_pod_posts_the_wire_fixture_to_filter() -> None:
    """`helm test` sends kube-scheduler's own /filter request: the chart's copy is the fixture."""
    fixture = ROOT / "tests" / "fixtures" / "wire" / "filter-request.json"
    copy_in_chart = CHART / "files" / "wire" / "filter-request.json"
    assert copy_in_chart.read_text().strip() == fixture.read_text().strip()
    script = one(template(tests=True), "Pod", "extender-webhook-test")["spec"]["containers"][0]["command"][-1]
    assert f'filter_url = "http://extender-webhook.{DEFAULT_NAMESPACE}.svc:8888/filter"' in script
    namespace: dict[str, Any] = {}
    exec(script.split("context = None")[0].replace("import json, ssl, sys, time, urllib.request", ""), namespace)
    assert json.loads(namespace["fixture"]) == json.loads(fixture.read_text())
