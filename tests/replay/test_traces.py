"""Reading traces: openb CSVs into the shared-GPU model, and every mistake named at its line."""

from __future__ import annotations

import json

import pytest

from extender.model.devices import GPU, GPU_CORES, GPU_MEMORY, INVENTORY_ANNOTATION, TYPE_ANNOTATION
from extender.replay.traces import TraceError, read_trace
from tests.replay.traces import small_cluster, write_nodes, write_pods


def test_openb_rows_become_nodes_with_gpu_inventories_and_pods_with_shares(tmp_path):
    nodes, pods = small_cluster(tmp_path)
    trace = read_trace(nodes=str(nodes), pods=str(pods))
    assert len(trace.nodes) == 6 and len(trace.pods) == 30
    assert trace.gpu_capacity == (2 + 2 + 4 + 4 + 8 + 1) * 1000
    inventory = json.loads(trace.nodes[2]["metadata"]["annotations"][INVENTORY_ANNOTATION])
    assert [(d["type"], d["cores"]) for d in inventory["devices"]] == [("V100", 100)] * 4
    assert trace.nodes[2]["status"]["allocatable"] == {"cpu": "64000m", "memory": "262144Mi", "pods": "1001"}
    share = trace.pods[0]
    assert share.shape.milli == 500 and share.shape.count == 1 and share.gpu == 500
    limits = share.raw["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {GPU: "1", GPU_CORES: "50", GPU_MEMORY: "500"}
    whole = trace.pods[3]
    assert whole.gpu == 2000 and whole.raw["spec"]["containers"][0]["resources"]["limits"] == {GPU: "2"}
    typed = trace.pods[2]
    assert typed.raw["metadata"]["annotations"] == {TYPE_ANNOTATION: "T4,V100"}
    assert typed.shape.types == ("t4", "v100")
    cpu_only = trace.pods[4]
    assert cpu_only.gpu == 0 and "limits" in cpu_only.raw["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize(("rows", "message"), [
    (["a,1000,100,1,-5,"], "pods.csv:2: gpu_milli: must be at least 0, not -5"),
    (["a,-1,100,0,0,"], "pods.csv:2: cpu_milli: must be at least 0, not -1"),
    (["a,1000,100,1,500,", "b,1000,100,1,500,A100"], "pods.csv:3: gpu_spec: unknown GPU model 'A100'"),
    (["a,1000,100,2,500,"], "pods.csv:2: gpu_milli: 500 with num_gpu 2"),
    (["a,1000,100,1,505,"], "pods.csv:2: gpu_milli: 505 is not a multiple of 10"),
    (["a,1000,x,1,500,"], "pods.csv:2: memory_mib: expected an integer, not 'x'"),
    (["a,1000,100,1,500,", "a,1000,100,1,500,"], "pods.csv:3: name: 'a' is already on line 2"),
])
def test_a_bad_pod_row_names_the_file_the_line_and_the_field(tmp_path, rows, message):
    nodes = write_nodes(tmp_path / "nodes.csv", ["n0,32000,131072,2,T4"])
    pods = write_pods(tmp_path / "pods.csv", rows)
    with pytest.raises(TraceError) as caught:
        read_trace(nodes=str(nodes), pods=str(pods))
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path))
    assert "\n" not in str(caught.value)


def test_a_missing_column_is_named(tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,model\nn0,1,1,T4\n")
    pods = write_pods(tmp_path / "pods.csv", ["a,1000,100,1,500,"])
    with pytest.raises(TraceError, match=r"nodes.csv:1: missing column 'gpu'"):
        read_trace(nodes=str(nodes), pods=str(pods))


def test_a_pod_list_without_gpu_spec_asks_for_any_model(tmp_path):
    """openb's multigpu20/30/40 pod lists have no gpu_spec column."""
    nodes = write_nodes(tmp_path / "nodes.csv", ["n0,32000,131072,2,T4"])
    pods = tmp_path / "pods.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,100,1,500\n")
    (pod,) = read_trace(nodes=str(nodes), pods=str(pods)).pods
    assert pod.shape.types == () and pod.shape.milli == 500
    assert TYPE_ANNOTATION not in pod.raw["metadata"]["annotations"]
    pods.write_text("name,cpu_milli,memory_mib,num_gpu\na,1000,100,1\n")
    with pytest.raises(TraceError, match=r"pods.csv:1: missing column 'gpu_milli'"):
        read_trace(nodes=str(nodes), pods=str(pods))


def test_a_node_with_gpus_needs_a_model(tmp_path):
    nodes = write_nodes(tmp_path / "nodes.csv", ["n0,32000,131072,2,"])
    pods = write_pods(tmp_path / "pods.csv", ["a,1000,100,1,500,"])
    with pytest.raises(TraceError, match=r"nodes.csv:2: model: a node with 2 GPUs needs a model"):
        read_trace(nodes=str(nodes), pods=str(pods))


def test_a_snapshot_and_a_yaml_pod_list(tmp_path):
    snapshot = tmp_path / "snap.yaml"
    snapshot.write_text("""
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata:
    name: g1
    annotations:
      extender.example/gpu-devices: '{"devices":[{"id":"a","type":"T4","memory":15360},{"id":"b","type":"T4","memory":15360}]}'
  status:
    allocatable: {cpu: "16", memory: 64Gi, pods: "110"}
    conditions: [{type: Ready, status: "True"}]
""")
    pods = tmp_path / "pods.yaml"
    pods.write_text("""
- apiVersion: v1
  kind: Pod
  metadata: {name: infer, namespace: ml}
  spec:
    containers:
    - name: c
      resources:
        limits: {extender.example/gpu: 1, extender.example/gpu-memory: 7680, extender.example/gpu-cores: 50}
        requests: {cpu: "2"}
""")
    trace = read_trace(snapshot=str(snapshot), pods=str(pods))
    assert trace.gpu_capacity == 2000
    assert [(p.name, p.shape.cpu, p.shape.milli, p.shape.count) for p in trace.pods] == [("ml/infer", 2000, 500, 1)]


def test_nodes_or_snapshot_but_not_both(tmp_path):
    nodes, pods = small_cluster(tmp_path)
    with pytest.raises(TraceError, match="--nodes .* or --snapshot"):
        read_trace(pods=str(pods))
    with pytest.raises(TraceError, match="--nodes .* or --snapshot"):
        read_trace(nodes=str(nodes), snapshot=str(nodes), pods=str(pods))
