"""settings.usage: defaults, every field, and a precise path for every mistake."""

from __future__ import annotations

import pytest

from extender.errors import PolicyError
from extender.policy.builtin.arguments import read_duration as duration
from extender.policy.loading import load_policy
from extender.policy.usage_settings import (
    DEFAULT_CPU_QUERY,
    AnnotationSettings,
    PrometheusSettings,
    Query,
    UsageSettings,
    parse_usage_settings,
    usage_settings,
    uses_usage,
)


def test_defaults():
    settings = parse_usage_settings(None)
    assert settings == UsageSettings()
    assert (settings.source, settings.interval, settings.max_age, settings.reporting_lag) == \
        ("metrics-server", 30.0, 90.0, 60.0)
    assert settings.smoothing == pytest.approx(2 / 11)
    assert settings.annotations == AnnotationSettings("cpu_usage_avg_5m", "mem_usage_avg_5m", "", "", "percent")


def test_max_age_defaults_to_three_intervals():
    assert parse_usage_settings({"interval": "1m"}).max_age == 180.0
    assert parse_usage_settings({"interval": 10, "maxAge": "15s"}).max_age == 15.0


@pytest.mark.parametrize(("raw", "seconds"), [(30, 30.0), (1.5, 1.5), ("30s", 30.0), ("2m", 120.0),
                                              ("500ms", 0.5), ("1h", 3600.0), (" 45 s ", 45.0)])
def test_durations(raw, seconds):
    assert duration(raw) == seconds


def test_prometheus_block():
    settings = parse_usage_settings({
        "source": "prometheus", "interval": "15s",
        "prometheus": {"url": "https://prom.monitoring:9090/", "nodeLabel": "instance", "timeout": "2s",
                       "window": "10m", "bearerTokenFile": "/var/run/token", "caFile": "/etc/ca.crt",
                       "queries": {"memory": {"query": "node_mem_used_bytes", "unit": "absolute"},
                                   "cpuStdev": "stddev_over_time(cpu_ratio[10m])"}},
    })
    assert settings.prometheus == PrometheusSettings(
        url="https://prom.monitoring:9090", node_label="instance", timeout=2.0,
        cpu=Query(DEFAULT_CPU_QUERY, "ratio"), memory=Query("node_mem_used_bytes", "absolute"),
        cpu_stdev=Query("stddev_over_time(cpu_ratio[10m])", "ratio"), memory_stdev=None, window=600.0,
        bearer_token_file="/var/run/token", ca_file="/etc/ca.crt")
    # null turns a default query off
    assert parse_usage_settings({"source": "prometheus", "prometheus": {
        "url": "http://p:9090", "queries": {"memory": None}}}).prometheus.memory is None


def test_annotations_block():
    settings = parse_usage_settings({"source": "annotations", "annotations": {
        "cpu": "example.com/cpu", "memory": None, "cpuStdev": "example.com/cpu-stdev", "unit": "ratio"}})
    assert settings.annotations == AnnotationSettings("example.com/cpu", "", "example.com/cpu-stdev", "", "ratio")


@pytest.mark.parametrize(("raw", "message"), [
    ("fast", "settings.usage: expected a mapping"),
    ({"source": "kubelet"}, "settings.usage.source: must be one of metrics-server, prometheus, annotations"),
    ({"interval": "0.5s"}, "settings.usage.interval: must be from 1s to"),
    ({"interval": "soon"}, "settings.usage.interval: expected a duration"),
    ({"interval": True}, "settings.usage.interval: expected a duration"),
    ({"interval": 60, "maxAge": 30}, "settings.usage.maxAge: must be at least the interval"),
    ({"reportingLag": -1}, "settings.usage.reportingLag: must be from 0s"),
    ({"varianceSamples": 0}, "settings.usage.varianceSamples: must be an integer from 1"),
    ({"source": "prometheus"}, "settings.usage.prometheus: required with source: prometheus"),
    ({"prometheus": {"url": "prom:9090"}}, "settings.usage.prometheus.url: must start with http"),
    ({"prometheus": {"url": "http://p", "queries": {"cpu": {"query": "x", "unit": "cores"}}}},
     "settings.usage.prometheus.queries.cpu.unit: must be one of ratio, percent, absolute"),
    ({"prometheus": {"url": "http://p", "queries": {"disk": "x"}}},
     "settings.usage.prometheus.queries.disk: unknown argument"),
    ({"prometheus": {"url": "http://p", "queries": {"cpu": None, "memory": None}}},
     "settings.usage.prometheus.queries: needs a cpu or a memory query"),
    ({"prometheus": {"url": "http://p", "timeout": "0s"}}, "settings.usage.prometheus.timeout: must be from 0.1s"),
    ({"annotations": {"cpu": "", "memory": None}}, "settings.usage.annotations: needs a cpu or a memory"),
    ({"annotations": {"unit": "cores"}}, "settings.usage.annotations.unit: must be one of"),
    ({"sources": "prometheus"}, "settings.usage.sources: unknown argument"),
])
def test_mistakes_name_their_path(raw, message):
    with pytest.raises(PolicyError, match=message):
        parse_usage_settings(raw)


# Every message of the block, word for word (the table above checks their starts).
MESSAGES = [
    ('fast',
     'settings.usage: expected a mapping'),
    ({'source': 'kubelet'},
     'settings.usage.source: must be one of metrics-server, prometheus, annotations'),
    ({'interval': '0.5s'},
     'settings.usage.interval: must be from 1s to 604800s'),
    ({'interval': 'soon'},
     'settings.usage.interval: expected a duration such as 30s, 2m or a number of seconds'),
    ({'interval': True},
     'settings.usage.interval: expected a duration such as 30s, 2m or a number of seconds'),
    ({'interval': 60, 'maxAge': 30},
     'settings.usage.maxAge: must be at least the interval (60s), or every sample would be stale before the next one'),
    ({'reportingLag': -1},
     'settings.usage.reportingLag: must be from 0s to 604800s'),
    ({'varianceSamples': 0},
     'settings.usage.varianceSamples: must be an integer from 1 to 10000'),
    ({'varianceSamples': 1.5},
     'settings.usage.varianceSamples: must be an integer from 1 to 10000'),
    ({'source': 'prometheus'},
     'settings.usage.prometheus: required with source: prometheus (at least its url)'),
    ({'source': 'prometheus', 'prometheus': None},
     'settings.usage.prometheus: required with source: prometheus (at least its url)'),
    ({'prometheus': {'url': 'prom:9090'}},
     'settings.usage.prometheus.url: must start with http:// or https://'),
    ({'prometheus': {}},
     'settings.usage.prometheus.url: expected a non-empty string'),
    ({'prometheus': {'url': ''}},
     'settings.usage.prometheus.url: expected a non-empty string'),
    ({'prometheus': 3},
     'settings.usage.prometheus: expected a mapping'),
    ({'prometheus': {'url': 'http://p', 'queries': {'cpu': {'query': 'x', 'unit': 'cores'}}}},
     'settings.usage.prometheus.queries.cpu.unit: must be one of ratio, percent, absolute'),
    ({'prometheus': {'url': 'http://p', 'queries': {'cpu': {'unit': 'ratio'}}}},
     'settings.usage.prometheus.queries.cpu.query: expected a non-empty string'),
    ({'prometheus': {'url': 'http://p', 'queries': {'cpu': {'query': 'x', 'u': 1}}}},
     'settings.usage.prometheus.queries.cpu.u: unknown argument (allowed: query, unit)'),
    ({'prometheus': {'url': 'http://p', 'queries': {'cpu': 3}}},
     'settings.usage.prometheus.queries.cpu: expected a mapping'),
    ({'prometheus': {'url': 'http://p', 'queries': {'cpu': ''}}},
     'settings.usage.prometheus.queries.cpu: expected a non-empty string'),
    ({'prometheus': {'url': 'http://p', 'queries': {'disk': 'x'}}},
     'settings.usage.prometheus.queries.disk: unknown argument (allowed: cpu, cpuStdev, memory, memoryStdev)'),
    ({'prometheus': {'url': 'http://p', 'queries': 3}},
     'settings.usage.prometheus.queries: expected a mapping'),
    ({'prometheus': {'url': 'http://p', 'queries': {'cpu': None, 'memory': None}}},
     'settings.usage.prometheus.queries: needs a cpu or a memory query'),
    ({'prometheus': {'url': 'http://p', 'timeout': '0s'}},
     'settings.usage.prometheus.timeout: must be from 0.1s to 604800s'),
    ({'prometheus': {'url': 'http://p', 'window': '2w'}},
     'settings.usage.prometheus.window: expected a duration such as 30s, 2m or a number of seconds'),
    ({'prometheus': {'url': 'http://p', 'nodeLabel': ''}},
     'settings.usage.prometheus.nodeLabel: expected a non-empty string'),
    ({'prometheus': {'url': 'http://p', 'bearerTokenFile': 3}},
     'settings.usage.prometheus.bearerTokenFile: expected a non-empty string'),
    ({'prometheus': {'url': 'http://p', 'caFile': ''}},
     'settings.usage.prometheus.caFile: expected a non-empty string'),
    ({'prometheus': {'url': 'http://p', 'ur': ''}},
     'settings.usage.prometheus.ur: unknown argument (allowed: bearerTokenFile, caFile, nodeLabel, queries, timeout, url, window)'),
    ({'annotations': {'cpu': '', 'memory': None}},
     'settings.usage.annotations: needs a cpu or a memory annotation key'),
    ({'annotations': {'unit': 'cores'}},
     'settings.usage.annotations.unit: must be one of ratio, percent, absolute'),
    ({'annotations': {'cpu': 3}},
     'settings.usage.annotations.cpu: expected a non-empty string'),
    ({'annotations': 3},
     'settings.usage.annotations: expected a mapping'),
    ({'annotations': {'gpu': 'x'}},
     'settings.usage.annotations.gpu: unknown argument (allowed: cpu, cpuStdev, memory, memoryStdev, unit)'),
    ({'sources': 'prometheus'},
     'settings.usage.sources: unknown argument (allowed: annotations, interval, maxAge, prometheus, reportingLag, source, varianceSamples)'),
    ({'interval': '9999999s'},
     'settings.usage.interval: must be from 1s to 604800s'),
    ({'interval': float("nan")},
     'settings.usage.interval: must be from 1s to 604800s'),
    ({'maxAge': '1x'},
     'settings.usage.maxAge: expected a duration such as 30s, 2m or a number of seconds'),
    ({1: 2},
     'settings.usage: key 1 is not a string (quote it in YAML)'),
]


@pytest.mark.parametrize(("raw", "message"), MESSAGES, ids=[str(i) for i in range(len(MESSAGES))])
def test_each_mistake_reads_as_before(raw, message):
    with pytest.raises(PolicyError) as caught:
        parse_usage_settings(raw)
    assert str(caught.value) == message


def test_load_policy_checks_the_block_and_reports_every_error_at_once():
    text = """
apiVersion: extender/v1alpha1
kind: Policy
filters: [{name: NodeLoad, args: {cpu: 200}}]
settings:
  usage: {interval: 0}
"""
    with pytest.raises(PolicyError) as caught:
        load_policy(text, source="p.yaml")
    assert str(caught.value) == ("p.yaml: filters[0].args.cpu: must be a percentage above 0 and at most 100; "
                                 "settings.usage.interval: must be from 1s to 604800s")


def test_uses_usage_and_usage_settings_of_a_policy():
    plain = load_policy("apiVersion: extender/v1alpha1\nkind: Policy\nfilters: [{name: NodeReady}]\n")
    loaded = load_policy("apiVersion: extender/v1alpha1\nkind: Policy\nscores: [{name: TargetLoadPacking}]\n"
                         "settings: {usage: {interval: 10s}}\n")
    assert not uses_usage(plain) and uses_usage(loaded)
    assert usage_settings(loaded.settings).interval == 10.0
    assert usage_settings(plain.settings) == UsageSettings()


def test_the_shipped_example_and_its_commented_alternatives_load():
    from extender.policy.loading import load_policy_file
    from tests.helpers import ROOT

    path = ROOT / "config" / "policy-load-aware.yaml"
    policy = load_policy_file(path)
    assert uses_usage(policy) and usage_settings(policy.settings).source == "metrics-server"
    text = path.read_text()
    head, _, alternatives = text.partition("    varianceSamples: 10\n")
    for source in ("prometheus", "annotations"):
        start = alternatives.index(f"    # source: {source}")
        block = alternatives[start:].split("\n\n")[0]
        uncommented = "\n".join(line.replace("    # ", "    ", 1) for line in block.splitlines()
                                if line.startswith("    # ") and not line.startswith("    # Or "))
        variant = load_policy(head.replace("    source: metrics-server\n", "") + uncommented + "\n")
        assert usage_settings(variant.settings).source == source
