"""The shared-GPU configuration rules `extender check` enforces, on kube-scheduler's file and on policies."""

from __future__ import annotations

from pathlib import Path

import yaml

from extender.checks.configs import check_policy, check_scheduler_config, validate_scheduler_config

from . import CONFIG

GPU_RESOURCES = ["extender.example/gpu", "extender.example/gpu-memory", "extender.example/gpu-cores"]


def _devices_config() -> dict:
    return yaml.safe_load((CONFIG / "kube-scheduler-devices.yaml").read_text())


def test_the_shipped_device_configs_pass() -> None:
    assert check_scheduler_config(CONFIG / "kube-scheduler-devices.yaml") == []
    assert check_policy(CONFIG / "policy-devices.yaml") == []
    assert check_policy(CONFIG / "policy-webhook-devices.yaml") == []
    managed = _devices_config()["extenders"][0]["managedResources"]
    assert [(m["name"], m["ignoredByScheduler"]) for m in managed] == [(r, True) for r in GPU_RESOURCES]


def test_gpu_resources_need_the_extender_to_bind() -> None:
    doc = _devices_config()
    del doc["extenders"][0]["bindVerb"]
    (problem,) = validate_scheduler_config(doc)
    assert problem.startswith("extenders[0].bindVerb: required with shared GPUs")


def test_gpu_resources_go_together_and_are_ignored_by_kube_scheduler() -> None:
    doc = _devices_config()
    extender = doc["extenders"][0]
    extender["managedResources"] = [{"name": "extender.example/gpu", "ignoredByScheduler": False}]
    problems = validate_scheduler_config(doc)
    assert problems == [
        "extenders[0].managedResources: shared GPUs need all of extender.example/gpu, extender.example/gpu-memory, "
        "extender.example/gpu-cores; missing extender.example/gpu-memory, extender.example/gpu-cores",
        "extenders[0].managedResources: set ignoredByScheduler: true for extender.example/gpu (kube-scheduler "
        "would count the shares as whole units against node allocatable)",
    ]


def test_other_managed_resources_are_not_concerned() -> None:
    doc = _devices_config()
    doc["extenders"][0]["managedResources"] = [{"name": "example.com/fpga", "ignoredByScheduler": True}]
    del doc["extenders"][0]["bindVerb"]
    assert validate_scheduler_config(doc) == []


def test_a_policy_counting_gpu_resources_twice_is_refused(tmp_path: Path) -> None:
    policy = yaml.safe_load((CONFIG / "policy-devices.yaml").read_text())
    fit = next(f for f in policy["filters"] if f["name"] == "ResourceFit")
    fit["args"] = {"ignoredResources": ["extender.example/gpu"]}
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    (problem,) = check_policy(path)
    index = [f["name"] for f in policy["filters"]].index("ResourceFit")
    assert problem == (f"{path}: filters[{index}] (ResourceFit) counts extender.example/gpu-memory, "
                       "extender.example/gpu-cores, which DeviceFit shares out; add args: "
                       "{ignoredResourceGroups: [extender.example]}")
    del fit["args"]
    policy["filters"] = [f for f in policy["filters"] if f["name"] != "DeviceFit"]
    path.write_text(yaml.safe_dump(policy))
    assert check_policy(path) == []  # without DeviceFit the resources are ResourceFit's to count


def test_the_standalone_gpu_policy_is_the_default_plus_the_device_plugins() -> None:
    from extender.policy.builtin import DeviceAllocation, DeviceFit, ResourceFit
    from extender.policy.defaults import default_policy
    from extender.policy.loading import load_policy_file

    default = default_policy("standalone")
    devices = load_policy_file(CONFIG / "policy-devices.yaml")
    expected = [ResourceFit(ignored_resource_groups=frozenset({"extender.example"})) if isinstance(f, ResourceFit)
                else f for f in default.filters]
    assert list(devices.filters) == [*expected, DeviceFit()]
    assert [(s.plugin, s.weight) for s in devices.scorers] == [
        *((s.plugin, s.weight) for s in default.scorers), (DeviceAllocation(), 5)]
