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
    policies = sorted(CONFIG.glob("policy*.yaml"))
    assert policies, f"no policy*.yaml in {CONFIG}"
    for path in policies:
        assert check_policy(path) == [], path


def test_check_policy_reports_a_bad_policy(tmp_path: Path) -> None:
    bad = tmp_path / "policy.yaml"
    bad.write_text("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: 3\n")
    (problem,) = check_policy(bad)
    assert problem.startswith(str(bad))
    assert check_policy(tmp_path / "missing.yaml")[0].startswith(str(tmp_path / "missing.yaml"))


# --- every message, word for word ----------------------------------------------------------

# (where, value, problems): `where` is a top-level field set to `value`, or "extenders.0" whose
# fields are updated with it; the problems are what `extender check` prints, in order.
MESSAGES = [
    ('parallelism', 'x',
     ['parallelism: must be an integer, not a string']),
    ('parallelism', 2147483648,
     ['parallelism: 2147483648 is out of range']),
    ('parallelism', 0,
     ['parallelism: must be > 0']),
    ('parallelism', True,
     ['parallelism: must be an integer, not a boolean']),
    ('podInitialBackoffSeconds', 0,
     ['podInitialBackoffSeconds: must be > 0']),
    ('podMaxBackoffSeconds', 1.5,
     ['podMaxBackoffSeconds: must be an integer, not a number']),
    ('percentageOfNodesToScore', -1,
     ['percentageOfNodesToScore: -1 is not in the range 0-100']),
    ('percentageOfPlacementsToScore', 101,
     ['percentageOfPlacementsToScore: 101 is not in the range 0-100']),
    ('enableProfiling', 'yes',
     ['enableProfiling: must be true or false, not a string']),
    ('delayCacheUntilActive', 1,
     ['delayCacheUntilActive: must be true or false, not a number']),
    ('clientConnection', {'qps': '5', 'burst': -1},
     ['clientConnection.qps: must be a number, not a string']),
    ('clientConnection', {'burst': -1},
     ['clientConnection.burst: must be >= 0']),
    ('clientConnection', {'qps': True},
     ['clientConnection.qps: must be a number, not a boolean']),
    ('clientConnection', [],
     ['clientConnection: must be a mapping, not a list']),
    ('clientConnection', 'x',
     ['clientConnection: must be a mapping, not a string']),
    ('leaderElection', {'leaseDuration': 15},
     ['leaderElection.leaseDuration: must be a duration string such as "5s", not a number']),
    ('leaderElection', {'retryPeriod': '-1s'},
     ['leaderElection.retryPeriod: must be > 0']),
    ('leaderElection', {'leaseDuration': '1s', 'renewDeadline': '2s'},
     ['leaderElection.leaseDuration: must be greater than renewDeadline']),
    ('leaderElection', {'leaderelect': True},
     ["leaderElection.leaderelect: unknown field (did you mean 'leaderElect'? field names are case-sensitive)"]),
    ('leaderElection', {'resourceLock': 'endpoints'},
     ['leaderElection.resourceLock: must be "leases", not \'endpoints\'']),
    ('profiles', {},
     ['profiles: must be a list, not a mapping']),
    ('profiles', [3],
     ['profiles[0]: must be a mapping, not a number']),
    ('profiles', [{'schedulerName': 3}],
     ['profiles[0].schedulerName: must be a string, not a number']),
    ('profiles', [{'plugins': {'filter': {'enabled': [{'weight': 1}]}}}],
     ['profiles[0].plugins.filter.enabled[0].name: required']),
    ('profiles', [{'plugins': {'filter': {'enabled': {}}}}],
     ['profiles[0].plugins.filter.enabled: must be a list, not a mapping']),
    ('profiles', [{'plugins': {'Filter': {}}}],
     ["profiles[0].plugins.Filter: unknown field (did you mean 'filter'? field names are case-sensitive)"]),
    ('profiles', [{'plugins': {'score': {'enabled': [{'name': 'a', 'weight': 2147483648}]}}}],
     ['profiles[0].plugins.score.enabled[0].weight: 2147483648 is out of range']),
    ('profiles', [{'pluginConfig': [{'args': {}}, {'name': 'A'}, {'name': 'A', 'args': 3}]}],
     ['profiles[0].pluginConfig[0].name: required',
      "profiles[0].pluginConfig[2].name: duplicate 'A'"]),
    ('profiles', [{'schedulerName': 'a', 'plugins': {'queueSort': {'enabled': [{'name': 'X'}]}}}, {'schedulerName': 'b'}],
     ['profiles[1].plugins.queueSort: must be the same for all profiles']),
    ('profiles', [{'schedulerName': 'a', 'percentageOfPlacementsToScore': 200}],
     ['profiles[0].percentageOfPlacementsToScore: 200 is not in the range 0-100']),
    ('extenders', [3],
     ['extenders[0]: must be a mapping, not a number']),
    ('extenders', 'x',
     ['extenders: must be a list, not a string']),
    ('extenders.0', {'tlsConfig': {'certData': 5}},
     ['extenders[0].tlsConfig.certData: must be a base64 string, not a number']),
    ('extenders.0', {'tlsConfig': {'caData': '!!'}},
     ['extenders[0].tlsConfig.caData: is not valid base64 (it holds PEM bytes, base64-encoded)']),
    ('extenders.0', {'tlsConfig': []},
     ['extenders[0].tlsConfig: must be a mapping, not a list']),
    ('extenders.0', {'managedResources': [{'name': 3}]},
     ['extenders[0].managedResources[0].name: must be a string, not a number']),
    ('extenders.0', {'managedResources': {'name': 'a'}},
     ['extenders[0].managedResources: must be a list, not a mapping']),
    ('extenders.0', {'managedResources': [{'name': ''}]},
     ['extenders[0].managedResources[0].name: required']),
    ('extenders.0', {'managedResources': [{'name': 'a/b/c'}]},
     ["extenders[0].managedResources[0].name: 'a/b/c' is not a qualified name (DOMAIN/NAME)"]),
    ('extenders.0', {'managedResources': [{'name': 'Example.com/gpu'}]},
     ["extenders[0].managedResources[0].name: 'Example.com/gpu': prefix 'Example.com' must be a DNS subdomain"]),
    ('extenders.0', {'managedResources': [{'name': 'example.com/-gpu'}]},
     ["extenders[0].managedResources[0].name: 'example.com/-gpu': name part must be 1-63 alphanumerics, '-', '_' or '.'"]),
    ('extenders.0', {'managedResources': [{'name': 'requests.example.com/gpu'}]},
     ["extenders[0].managedResources[0].name: 'requests.example.com/gpu' is not an extended resource name (use DOMAIN/NAME outside kubernetes.io)"]),
    ('extenders.0', {'urlPrefix': 'http://x:8888/a?b'},
     ['extenders[0].urlPrefix: must not have a query or fragment (verbs are appended)',
      "extenders[0].filterVerb: 'filter' makes kube-scheduler POST /a/filter, but the extender serves filter at /filter",
      "extenders[0].prioritizeVerb: 'prioritize' makes kube-scheduler POST /a/prioritize, but the extender serves prioritize at /prioritize",
      "extenders[0].preemptVerb: 'preempt' makes kube-scheduler POST /a/preempt, but the extender serves preempt at /preempt",
      "extenders[0].bindVerb: 'bind' makes kube-scheduler POST /a/bind, but the extender serves bind at /bind"]),
    ('extenders.0', {'urlPrefix': 'http://[::1'},
     ["extenders[0].urlPrefix: 'http://[::1' is not a URL (Invalid IPv6 URL)"]),
    ('extenders.0', {'weight': 9223372036854775808},
     ['extenders[0].weight: 9223372036854775808 is out of range']),
    ('extenders.0', {'urlprefix': 'http://x'},
     ["extenders[0].urlprefix: unknown field (did you mean 'urlPrefix'? field names are case-sensitive)"]),
    ('extenders.0', {'UrlPrefix': 'http://x'},
     ["extenders[0].UrlPrefix: unknown field (did you mean 'urlPrefix'? field names are case-sensitive)"]),
    ('extenders.0', {'ignorable': 'no'},
     ['extenders[0].ignorable: must be true or false, not a string']),
    ('extenders.0', {'urlPrefix': 'https://x:1', 'enableHTTPS': True, 'tlsConfig': {'insecure': True, 'keyData': 'YQ=='}},
     ['extenders[0].tlsConfig: a client certificate and its key must be set together']),
]


@pytest.mark.parametrize(("where", "value", "expected"), MESSAGES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MESSAGES)])
def test_each_mistake_reads_as_before(where: str, value: object, expected: list[str]) -> None:
    doc = good()
    if where == "extenders.0":
        doc["extenders"][0].update(value)  # type: ignore[call-overload]
    else:
        doc[where] = value
    assert problems_of(doc) == expected


def test_a_key_that_is_no_string_is_named_as_written() -> None:
    doc = good()
    doc[1] = 2
    doc["extenders"][0][True] = 1
    assert problems_of(doc) == ["1: unknown field", "extenders[0].True: unknown field"]


@pytest.mark.parametrize("document", [None, "x", [], 3])
def test_a_document_that_is_no_mapping(document: object) -> None:
    (problem,) = problems_of(document)  # type: ignore[arg-type]
    assert problem.startswith("(top level): must be a mapping, not ")


def test_a_null_profile_is_an_empty_one() -> None:
    """kube-scheduler decodes `- null` in a list of structs as the zero value; it must not crash the check."""
    doc = good()
    doc["profiles"].append(None)
    assert problems_of(doc) == ["profiles[1].schedulerName: required when there are several profiles"]
