"""The scheduler_perf corpus as bench/scheduler_perf/corpus.py reads it, against the real files.

The files come from the kubernetes v1.36.3 source in the Go module cache; without it every
test here is skipped, saying so. The expectations are facts of those files (a test case's
params, its operations, a template's output), read off them by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.scheduler_perf import corpus, informer
from bench.scheduler_perf.executor import parse_duration
from tests.bench import load_config


@pytest.fixture(scope="module")
def root() -> Path:
    try:
        return corpus.locate()
    except corpus.CorpusError as exc:
        pytest.skip(f"no kubernetes v1.36.3 source in the Go module cache "
                    f"(../shared/tools/k8s-test-binaries.sh downloads it): {exc}")


@pytest.fixture(scope="module")
def workloads(root: Path) -> list[corpus.Workload]:
    return corpus.load_workloads(root)


def find(workloads: list[corpus.Workload], key: str) -> corpus.Workload:
    (found,) = corpus.select(workloads, [key])
    return found


def test_params_substituted_and_paths_made_absolute(workloads: list[corpus.Workload]) -> None:
    basic = find(workloads, "SchedulingBasic/5000Nodes")
    assert [op["opcode"] for op in basic.ops] == ["createNodes", "createPods", "createPods"]
    assert [op["count"] for op in basic.ops] == [5000, 1000, 1000]
    assert basic.ops[2]["collectMetrics"] is True
    assert basic.default_pod_template is not None
    assert basic.default_pod_template.endswith("scheduler_perf/templates/pod-default.yaml")
    assert Path(basic.default_pod_template).is_file()
    assert basic.size == (5000, 2000)


def test_variant_names_with_slashes_are_selected_whole(workloads: list[corpus.Workload]) -> None:
    unschedulable = find(workloads, "Unschedulable/5Nodes/1Init/10Pods")
    assert unschedulable.params == {"initNodes": 5, "initPods": 1, "measurePods": 10}
    churn = unschedulable.ops[2]
    assert churn["opcode"] == "churn" and churn["mode"] == "create" and churn["intervalMilliseconds"] == 200
    assert all(Path(p).is_file() for p in churn["templatePaths"])


def test_pod_sets_unrolled_like_scheduler_perf(workloads: list[corpus.Workload]) -> None:
    """createPodSets becomes one createPods per namespace, so later op indices match Go's."""
    workload = find(workloads, "SchedulingRequiredPodAntiAffinityWithNSSelector/10Nodes")
    opcodes = [op["opcode"] for op in workload.ops]
    assert opcodes == ["createNodes", "createNamespaces", "createNamespaces", "createPods", "createPods", "createPods"]
    assert [op.get("namespace") for op in workload.ops[3:]] == ["init-ns-0", "init-ns-1", "measure-ns-0"]
    assert [op["count"] for op in workload.ops[3:]] == [2, 2, 6]


def test_node_strategies_kept(workloads: list[corpus.Workload]) -> None:
    csi = find(workloads, "SchedulingCSIPVs/5Nodes").ops[0]
    assert csi["nodeAllocatableStrategy"]["nodeAllocatable"] == {"attachable-volumes-csi-ebs.csi.aws.com": "39"}
    assert csi["nodeAllocatableStrategy"]["csiNodeAllocatable"] == {"ebs.csi.aws.com": {"count": 39}}
    spread = find(workloads, "TopologySpreading/5Nodes").ops[0]
    assert spread["labelNodePrepareStrategy"] == {"labelKey": "topology.kubernetes.io/zone",
                                                  "labelValues": ["moon-1", "moon-2", "moon-3"]}


def test_go_template_functions_rendered(root: Path) -> None:
    """podupdate-pod-blocker-update.yaml asks {{ DivideInt 30000 .Count }}Mi; poddelete
    templates use {{.Index}} in names."""
    text = (root / "event_handling/templates/podupdate-pod-blocker-update.yaml").read_text()
    pod = corpus.render(text, index=7, count=1000)
    assert pod["metadata"]["name"] == "pod-blocker-7"
    assert pod["spec"]["containers"][0]["resources"]["requests"]["memory"] == "30Mi"
    assert corpus.render("a: {{ Mod .Index 12 }}-{{DivideInt .Index 5}}", index=29, count=1) == {"a": "5-5"}


def test_unsupported_template_syntax_is_an_error() -> None:
    with pytest.raises(corpus.TemplateError):
        corpus.render("a: {{ if .Index }}x{{ end }}")


def test_node_declared_features_variants_run_with_the_gate_and_the_filter(workloads: list[corpus.Workload]) -> None:
    """performance-config.yaml of nodedeclaredfeatures: four variants, each with the gate on;
    node_declared_features_test.go names the features Feature1..N, sorted as strings."""
    variants = [w for w in workloads if w.folder == "nodedeclaredfeatures"]
    assert [w.variant for w in variants] == ["5Nodes5DeclaredFeatures", "5000Nodes20DeclaredFeatures",
                                             "5000Nodes40DeclaredFeatures", "5000Nodes100DeclaredFeatures"]
    for workload in variants:
        assert not workload.skip, (workload.key, workload.skip)
        assert workload.apiserver_args == ["--feature-gates=NodeDeclaredFeatures=true"]
        assert workload.kube_scheduler_gates == "NodeDeclaredFeatures=true"
        assert workload.our_policy_plugins == ("NodeDeclaredFeatures",)
    small = find(workloads, "NodeDeclaredFeaturesEnabled/5Nodes5DeclaredFeatures")
    assert small.size == (5, 10)
    assert small.declared_features == ["Feature1", "Feature2", "Feature3", "Feature4", "Feature5"]
    big = find(workloads, "NodeDeclaredFeaturesEnabled/5000Nodes20DeclaredFeatures").declared_features
    assert big[:4] == ["Feature1", "Feature10", "Feature11", "Feature12"] and len(big) == 20 == len(set(big))


def test_other_workloads_get_no_node_features_and_keep_their_flags(workloads: list[corpus.Workload]) -> None:
    basic = find(workloads, "SchedulingBasic/5Nodes")
    assert (basic.declared_features, basic.our_policy_plugins, basic.apiserver_args) == ([], (), [])
    assert basic.kube_scheduler_gates == ""
    rules = [w for w in workloads if w.taint_rules]
    assert rules, "DeviceTaintRule workloads"
    for workload in rules:
        assert workload.apiserver_args == [corpus.TAINT_RULE_RUNTIME_CONFIG, "--feature-gates=DRADeviceTaintRules=true"]
        assert workload.kube_scheduler_gates == "DRADeviceTaintRules=true"


def test_unimplemented_folders_skipped_with_reason_and_issue_workloads_covered(workloads: list[corpus.Workload]) -> None:
    covered = {w.name for w in workloads if not w.skip}
    assert "NodeDeclaredFeaturesEnabled" in covered
    assert {"SchedulingBasic", "SchedulingDaemonset", "PreemptionBasic", "Unschedulable", "SchedulingWithMixedChurn",
            "SchedulingWhileGated", "SchedulingDeletedPodsWithFinalizers", "SchedulingWithExtendedResource",
            "TopologySpreading", "PreferredTopologySpreading", "DefaultTopologySpreading",
            "SchedulingWithNodeInclusionPolicy", "SchedulingSecrets", "SchedulingInTreePVs",
            "SchedulingMigratedInTreePVs", "SchedulingCSIPVs", "PreemptionPVs", "EventHandlingPodDelete",
            "EventHandlingPodUpdate", "EventHandlingNodeAdd", "EventHandlingPodAdd", "EventHandlingNodeUpdate",
            } <= covered
    assert len({w.name for w in workloads if w.folder == "affinity" and not w.skip}) == 12


def test_unknown_opcode_makes_the_workload_skipped(tmp_path: Path) -> None:
    small, broken = load_config(tmp_path, "misc", "- name: X\n  workloadTemplate:\n  - opcode: createNodes\n"
                                "    countParam: $n\n  - opcode: teleportPods\n  workloads:\n  - name: small\n"
                                "    params: {n: 3}\n  - name: broken\n    params: {}\n")
    assert small.skip == "opcode(s) teleportPods not implemented"
    assert small.ops[0]["count"] == 3
    assert broken.skip == "cannot resolve its params: parameter n is undefined"


def test_largest_within_limits_prefers_default_gates(workloads: list[corpus.Workload]) -> None:
    chosen = {w.name: w for w in corpus.largest(workloads, max_nodes=5000, max_pods=2000)}
    assert chosen["SchedulingBasic"].variant == "5000Nodes"
    assert not chosen["SchedulingBasic"].disables_gates
    smallest = {w.name: w.variant for w in corpus.smallest(workloads)}
    # three 5-node variants; only this one turns no feature gate off
    assert smallest["SchedulingBasic"] == "5Nodes_AsyncAPICallsEnabled"


def test_no_bound_by_default_and_a_bound_names_what_it_left_out(workloads: list[corpus.Workload]) -> None:
    unbounded = {w.name: w for w in corpus.largest(workloads)}
    assert unbounded["SchedulingBasic"].size[1] > 8000  # the 50,000-pod variant, as scheduler_perf's CI runs it
    pairs = {w.name: (w, left_out) for w, left_out in corpus.largest_with_bounds(workloads, 5000, 2000)}
    chosen, left_out = pairs["SchedulingBasic"]
    assert chosen.size[1] <= 2000 and left_out is not None and left_out.key == unbounded["SchedulingBasic"].key
    assert all(left is None for _, left in corpus.largest_with_bounds(workloads, None, None))


def test_unknown_workload_name_raises(workloads: list[corpus.Workload]) -> None:
    with pytest.raises(KeyError):
        corpus.select(workloads, ["NoSuchWorkload/5Nodes"])


def test_locate_explains_a_missing_cache(tmp_path: Path) -> None:
    with pytest.raises(corpus.CorpusError, match="go mod download k8s.io/kubernetes@v1.36.3"):
        corpus.locate(tmp_path)


def test_throughput_percentiles_as_util_go() -> None:
    """util.go: sorted samples, PercN = samples[ceil(n*N/100) - 1], Average = mean."""
    collector = informer.ThroughputCollector("t", frozenset({"ns"}))
    collector.samples = [10.0, 30.0, 20.0, 40.0]
    assert collector.summary() == {"Average": 25.0, "Perc50": 20.0, "Perc90": 40.0, "Perc95": 40.0, "Perc99": 40.0}
    assert informer.ThroughputCollector("empty", frozenset()).summary() is None


def test_go_durations() -> None:
    assert parse_duration("1m30s") == 90.0
    assert parse_duration("500ms") == 0.5
    with pytest.raises(ValueError):
        parse_duration("10 seconds")


def test_a_refused_api_call_fails_the_workload_with_the_server_s_words() -> None:
    """A 4xx the runner does not retry (e.g. 409) is a WorkloadFailed naming the call and the
    server's message, not an AttributeError that loses both."""
    from bench.scheduler_perf.executor import Executor, WorkloadFailed
    from tests.fakeapi.client import KubeApiError

    class Refusing:
        def call(self, method: str, path: str, body: object, params: object) -> dict[str, object]:
            raise KubeApiError(409, {"reason": "AlreadyExists", "message": 'pods "p" already exists'})

    workload = corpus.Workload("misc", "W", "V", {}, [], None)
    executor = Executor(Refusing(), informer.PodCache(Refusing()), workload)
    with pytest.raises(WorkloadFailed, match=r'POST /api/v1/namespaces/x/pods: 409 AlreadyExists: pods "p" already'):
        executor._send("POST", "/api/v1/namespaces/x/pods", {})


def test_a_generated_name_taken_already_is_created_again() -> None:
    """kube-apiserver answers 409 AlreadyExists when the 5 random characters of a generateName
    collide (about once per 5,000 nodes); the client retries, as scheduler_perf's does."""
    from bench.scheduler_perf.executor import Executor, WorkloadFailed
    from tests.fakeapi.client import KubeApiError

    class CollidingOnce:
        calls = 0

        def call(self, method: str, path: str, body: object, params: object) -> dict[str, object]:
            self.calls += 1
            if self.calls == 1:
                raise KubeApiError(409, {"reason": "AlreadyExists", "message": 'nodes "scheduler-perf-x" already exists'})
            return {"metadata": {"name": "scheduler-perf-y"}}

    workload = corpus.Workload("misc", "W", "V", {}, [], None)
    kube = CollidingOnce()
    executor = Executor(kube, informer.PodCache(kube), workload)
    created = executor._send("POST", "/api/v1/nodes", {"metadata": {"generateName": "scheduler-perf-"}})
    assert created["metadata"]["name"] == "scheduler-perf-y" and kube.calls == 2
    with pytest.raises(WorkloadFailed, match="409 AlreadyExists"):  # a name we chose: not retried
        Executor(CollidingOnce(), informer.PodCache(kube), workload)._send(
            "POST", "/api/v1/nodes", {"metadata": {"name": "scheduler-perf-x"}})


def test_node_names_the_runner_picks_never_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner names nodes itself (their hostname label needs the name before the create), so
    it cannot count on kube-apiserver's retry of a taken generated name: a repeated draw of the 5
    random characters is drawn again (a 409 failed kube-scheduler's first ExtendedResource run)."""
    from bench.scheduler_perf import executor as module

    draws = iter(["aaaaa", "aaaaa", "aaaaa", "bbbbb"])
    monkeypatch.setattr(module.random, "choices", lambda population, k: list(next(draws)))
    workload = corpus.Workload("misc", "W", "V", {}, [], None)
    executor = module.Executor(None, None, workload)
    assert [executor._node_name("perf-") for _ in range(2)] == ["perf-aaaaa", "perf-bbbbb"]
