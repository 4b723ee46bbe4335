"""The strict KubeSchedulerConfiguration checker, and the examples it must accept."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from extender.checks.configs import (
    check_policy,
    check_scheduler_config,
    check_scheduler_config_text,
    parse_go_duration,
    validate_scheduler_config,
)

from . import CONFIG, ROOT

EXAMPLES = sorted(CONFIG.glob("kube-scheduler-*.yaml"))

GOOD = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: extender-kube-scheduler
extenders:
  - urlPrefix: http://extender-webhook.scheduler-extender.svc:8888
    filterVerb: filter
    prioritizeVerb: prioritize
    preemptVerb: preempt
    bindVerb: bind
    weight: 1
    nodeCacheCapable: true
    httpTimeout: 3s
"""


def good() -> dict:
    return yaml.safe_load(GOOD)


def problems_of(doc: dict, **kw: object) -> list[str]:
    return validate_scheduler_config(doc, **kw)  # type: ignore[arg-type]


def test_examples_exist() -> None:
    names = {path.name for path in EXAMPLES}
    assert {
        "kube-scheduler-http.yaml",
        "kube-scheduler-mtls.yaml",
        "kube-scheduler-managed-resources.yaml",
    } <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_config_examples_pass(path: Path) -> None:
    assert check_scheduler_config(path) == []


def test_deployed_second_scheduler_config_passes() -> None:
    path = ROOT / "deploy" / "components" / "kube-scheduler" / "kube-scheduler-config.yaml"
    assert check_scheduler_config(path) == []


def test_minimal_config_passes() -> None:
    assert problems_of(good()) == []


# --- unknown fields, at every level --------------------------------------------------


@pytest.mark.parametrize(
    ("where", "path"),
    [
        ((), "bogus"),
        (("clientConnection",), "clientConnection.bogus"),
        (("leaderElection",), "leaderElection.bogus"),
        (("profiles", 0), "profiles[0].bogus"),
        (("extenders", 0), "extenders[0].bogus"),
    ],
)
def test_unknown_field_is_refused(where: tuple, path: str) -> None:
    doc = good()
    doc.setdefault("clientConnection", {})
    doc.setdefault("leaderElection", {})
    target = doc
    for step in where:
        target = target[step]
    target["bogus"] = 1
    assert problems_of(doc) == [f"{path}: unknown field"]


def test_unknown_field_deep_inside() -> None:
    doc = good()
    ext = doc["extenders"][0]
    ext["urlPrefix"] = "https://x.example:8888"
    ext["enableHTTPS"] = True
    ext["tlsConfig"] = {"caFile": "/ca.crt", "caPath": "/x"}
    ext["managedResources"] = [{"name": "example.com/gpu", "ignored": True}]
    doc["profiles"][0]["plugins"] = {"score": {"enabled": [{"name": "X", "wieght": 2}]}}
    doc["profiles"][0]["pluginConfig"] = [{"name": "X", "args": {"anything": "goes"}, "arg": 1}]
    assert sorted(problems_of(doc)) == sorted(
        [
            "extenders[0].tlsConfig.caPath: unknown field",
            "extenders[0].managedResources[0].ignored: unknown field",
            "profiles[0].plugins.score.enabled[0].wieght: unknown field (did you mean 'weight'? "
            "field names are case-sensitive)",
            "profiles[0].pluginConfig[0].arg: unknown field (did you mean 'args'? "
            "field names are case-sensitive)",
        ]
    )


def test_field_names_are_case_sensitive() -> None:
    doc = good()
    doc["extenders"][0]["nodecachecapable"] = doc["extenders"][0].pop("nodeCacheCapable")
    (problem,) = problems_of(doc)
    assert problem.startswith("extenders[0].nodecachecapable: unknown field")
    assert "'nodeCacheCapable'" in problem


def test_duplicate_keys_are_refused() -> None:
    text = GOOD + "    weight: 2\n"
    assert any("duplicate field 'weight'" in p for p in check_scheduler_config_text(text))


# --- the rules kube-scheduler's validation applies ----------------------------------


def test_weight_zero_with_prioritize() -> None:
    doc = good()
    doc["extenders"][0]["weight"] = 0
    assert problems_of(doc) == ["extenders[0].weight: must be > 0 when prioritizeVerb is set"]


def test_missing_weight_with_prioritize() -> None:
    doc = good()
    del doc["extenders"][0]["weight"]
    assert problems_of(doc) == ["extenders[0].weight: must be > 0 when prioritizeVerb is set"]


def test_weight_zero_without_prioritize_is_fine() -> None:
    doc = good()
    del doc["extenders"][0]["prioritizeVerb"]
    doc["extenders"][0]["weight"] = 0
    assert problems_of(doc) == []


def test_two_binders() -> None:
    doc = good()
    second = dict(doc["extenders"][0], urlPrefix="http://other:8888")
    doc["extenders"].append(second)
    assert "extenders: only one extender may set bindVerb (extenders[0], extenders[1] do)" in (
        problems_of(doc)
    )


@pytest.mark.parametrize(
    ("field", "verb", "route"),
    [
        ("filterVerb", "predicates", "filter"),
        ("prioritizeVerb", "filter", "prioritize"),
        ("bindVerb", "Bind", "bind"),
        ("preemptVerb", "preemption", "preempt"),
    ],
)
def test_wrong_verb(field: str, verb: str, route: str) -> None:
    doc = good()
    doc["extenders"][0][field] = verb
    assert problems_of(doc) == [
        f"extenders[0].{field}: {verb!r} makes kube-scheduler POST /{verb}, "
        f"but the extender serves {route} at /{route}"
    ]


def test_url_prefix_of_the_webhook_is_honoured() -> None:
    doc = good()
    assert problems_of(doc, url_prefix="/scheduler")[0].startswith(
        "extenders[0].filterVerb: 'filter' makes kube-scheduler POST /filter, "
        "but the extender serves filter at /scheduler/filter"
    )
    doc["extenders"][0]["urlPrefix"] += "/scheduler/"  # a trailing slash is trimmed
    assert problems_of(doc, url_prefix="/scheduler") == []
    assert problems_of(doc, check_routes=False, url_prefix="") == []


def test_wrong_types() -> None:
    doc = good()
    ext = doc["extenders"][0]
    ext["weight"] = 1.5
    ext["httpTimeout"] = 5
    ext["nodeCacheCapable"] = "yes"
    ext["filterVerb"] = 3
    assert sorted(problems_of(doc)) == [
        "extenders[0].filterVerb: must be a string, not a number",
        'extenders[0].httpTimeout: must be a duration string such as "5s", not a number',
        "extenders[0].nodeCacheCapable: must be true or false, not a string",
        "extenders[0].weight: must be an integer, not a number",
    ]


@pytest.mark.parametrize("value", ["5", "5 s", "5sec", "s", "1h-2m", ""])
def test_bad_durations(value: str) -> None:
    doc = good()
    doc["extenders"][0]["httpTimeout"] = value
    # time.ParseDuration refuses "" too: an empty string is not "unset" for metav1.Duration.
    assert problems_of(doc) == [
        f'extenders[0].httpTimeout: {value!r} is not a duration (use Go syntax: "5s", "1m30s")'
    ]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5s", 5),
        ("1m30s", 90),
        ("250ms", 0.25),
        ("1.5h", 5400),
        ("0", 0),
        ("-2s", -2),
        (".5s", 0.5),
        ("1us", 1e-6),
        ("1\u00b5s", 1e-6),
        ("3ns", 3e-9),
        ("1h2m3s", 3723),
    ],
)
def test_parse_go_duration(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == pytest.approx(seconds)


def test_negative_timeout() -> None:
    doc = good()
    doc["extenders"][0]["httpTimeout"] = "-1s"
    assert problems_of(doc) == ["extenders[0].httpTimeout: must not be negative"]


@pytest.mark.parametrize(
    "url",
    ["extender:8888", "ftp://x/", "http://", "http://x:99999", "http://x/?a=1", ""],
)
def test_bad_url_prefix(url: str) -> None:
    doc = good()
    doc["extenders"][0]["urlPrefix"] = url
    problems = problems_of(doc, check_routes=False)
    assert problems and all(p.startswith("extenders[0].urlPrefix: ") for p in problems), problems


def test_https_without_ca_is_refused() -> None:
    doc = good()
    ext = doc["extenders"][0]
    ext["urlPrefix"] = "https://extender.example:8888"
    ext["enableHTTPS"] = True
    (problem,) = problems_of(doc)
    assert problem.startswith("extenders[0].tlsConfig.caFile: required with enableHTTPS")
    ext["tlsConfig"] = {"insecure": True}
    assert problems_of(doc) == []
    ext["tlsConfig"] = {"insecure": True, "caFile": "/ca.crt"}
    assert problems_of(doc) == [
        "extenders[0].tlsConfig.insecure: cannot be combined with caFile/caData (client-go refuses it)"
    ]


def test_enable_https_with_http_url() -> None:
    doc = good()
    doc["extenders"][0]["enableHTTPS"] = True
    doc["extenders"][0]["tlsConfig"] = {"caFile": "/ca.crt"}
    problems = problems_of(doc)
    assert (
        "extenders[0].enableHTTPS: true, but urlPrefix is http://; kube-scheduler would send plain HTTP"
        in problems
    )
    assert "extenders[0].tlsConfig: ignored for an http:// urlPrefix; use https://" in problems


def test_client_certificate_needs_its_key() -> None:
    doc = good()
    ext = doc["extenders"][0]
    ext.update(urlPrefix="https://x:8888", enableHTTPS=True)
    ext["tlsConfig"] = {"caFile": "/ca.crt", "certFile": "/client.crt"}
    assert problems_of(doc) == [
        "extenders[0].tlsConfig: a client certificate and its key must be set together"
    ]
    ext["tlsConfig"]["caData"] = "not base64!"
    assert (
        "extenders[0].tlsConfig.caData: is not valid base64 (it holds PEM bytes, base64-encoded)"
        in (problems_of(doc))
    )


def test_managed_resources() -> None:
    doc = good()
    ext = doc["extenders"][0]
    ext["managedResources"] = [
        {"name": "example.com/gpu"},
        {"name": "cpu"},
        {"name": "example.com/gpu"},
        {"name": "kubernetes.io/thing"},
    ]
    problems = problems_of(doc)
    assert any(
        p.startswith("extenders[0].managedResources[1].name: 'cpu' is not an extended")
        for p in problems
    )
    assert any(
        p.startswith("extenders[0].managedResources[2].name: 'example.com/gpu' is already managed")
        for p in problems
    )
    assert any(
        p.startswith("extenders[0].managedResources[3].name: 'kubernetes.io/thing'")
        for p in problems
    )
    assert len(problems) == 3


def test_ignorable_extender_must_not_be_the_only_check_of_a_resource() -> None:
    doc = good()
    ext = doc["extenders"][0]
    ext["ignorable"] = True
    ext["managedResources"] = [{"name": "example.com/gpu", "ignoredByScheduler": True}]
    (problem,) = problems_of(doc)
    assert problem.startswith(
        "extenders[0].managedResources[0].ignoredByScheduler: with ignorable: true"
    )


def test_extender_that_does_nothing() -> None:
    doc = good()
    for verb in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb"):
        del doc["extenders"][0][verb]
    (problem,) = problems_of(doc)
    assert "kube-scheduler would never call it" in problem


def test_api_version_and_kind() -> None:
    doc = good()
    doc["apiVersion"] = "kubescheduler.config.k8s.io/v1beta3"
    doc["kind"] = "Policy"
    assert problems_of(doc) == [
        "apiVersion: must be 'kubescheduler.config.k8s.io/v1', not 'kubescheduler.config.k8s.io/v1beta3'",
        "kind: must be 'KubeSchedulerConfiguration', not 'Policy'",
    ]


def test_profiles_and_backoff_and_leader_election() -> None:
    doc = good()
    doc["profiles"].append({"schedulerName": "extender-kube-scheduler"})
    doc["profiles"].append({"percentageOfNodesToScore": 101})
    doc["podInitialBackoffSeconds"] = 5
    doc["podMaxBackoffSeconds"] = 2
    doc["leaderElection"] = {"resourceLock": "endpoints", "leaseDuration": "5s"}
    assert sorted(problems_of(doc)) == sorted(
        [
            "profiles[1].schedulerName: 'extender-kube-scheduler' duplicates profiles[0]",
            "profiles[2].schedulerName: required when there are several profiles",
            "profiles[2].percentageOfNodesToScore: 101 is not in the range 0-100",
            "podMaxBackoffSeconds: must be >= podInitialBackoffSeconds",
            "leaderElection.resourceLock: must be \"leases\", not 'endpoints'",
            "leaderElection.leaseDuration: must be greater than renewDeadline",
        ]
    )
    doc = good()
    doc["leaderElection"] = {"leaderElect": False, "resourceLock": "endpoints"}
    assert problems_of(doc) == []


def test_file_level_problems(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    (problem,) = check_scheduler_config(missing)
    assert problem.startswith(f"{missing}: cannot read: ")
    assert check_scheduler_config_text("") == ["(top level): the file is empty"]
    assert check_scheduler_config_text(GOOD + "---\n" + GOOD) == [
        "(top level): more than one YAML document; kube-scheduler reads one"
    ]
    assert check_scheduler_config_text("- a\n- b\n") == [
        "(top level): must be a mapping, not a list"
    ]
    assert check_scheduler_config_text("a: [\n")[0].startswith("not valid YAML")


# --- policy files ------------------------------------------------------------------


def test_check_policy_accepts_the_shipped_policies() -> None:
    pytest.importorskip("extender.policy.loading")
    policies = sorted(CONFIG.glob("policy*.yaml"))
    if not policies:
        pytest.skip("no config/policy*.yaml yet")
    for path in policies:
        assert check_policy(path) == [], path


def test_check_policy_reports_a_bad_policy(tmp_path: Path) -> None:
    pytest.importorskip("extender.policy.loading")
    bad = tmp_path / "policy.yaml"
    bad.write_text("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: 3\n")
    (problem,) = check_policy(bad)
    assert problem.startswith(str(bad))
    assert check_policy(tmp_path / "missing.yaml")[0].startswith(str(tmp_path / "missing.yaml"))
