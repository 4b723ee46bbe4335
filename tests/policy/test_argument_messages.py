"""Every message a plugin's `args` can produce, pinned word for word as a user reads it from `load_policy`.

The arguments are checked by a schema when the policy loads; these cases hold the paths and the
wording a user fixes their file by, whatever does the checking. Where one entry holds two
mistakes, both are reported (the loader has always reported every plugin's problems at once).
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.errors import PolicyError
from extender.policy.builtin import NodeReady, ResourceFit
from extender.policy.loading import load_policy

R = "requiredDuringSchedulingIgnoredDuringExecution"
P = "preferredDuringSchedulingIgnoredDuringExecution"

#: Plugins that take no arguments: any argument is unknown.
NO_ARGUMENTS = [('filters', 'NodePorts'), ('filters', 'SchedulingGates'), ('filters', 'TaintToleration'),
                ('scores', 'TaintPreferNoSchedule'), ('filters', 'VolumeRestrictions'), ('filters', 'VolumeZone'),
                ('filters', 'NodeVolumeLimits'), ('filters', 'InterPodAffinity')]

CASES = [
    ('filters', 'NodeReady', 3,
     'args: expected a mapping'),
    ('filters', 'NodeReady', {1: 'x'},
     'args[1].key: expected a string'),
    ('filters', 'NodeReady', {'bogus': 1},
     'args.bogus: unknown argument (allowed: pressureConditions)'),
    ('filters', 'NodeReady', {'pressureConditions': 'MemoryPressure'},
     'args.pressureConditions: expected a list of strings'),
    ('filters', 'NodeReady', {'pressureConditions': ['', 'x']},
     'args.pressureConditions[0]: expected a non-empty string'),
    ('filters', 'NodeReady', {'pressureConditions': [3]},
     'args.pressureConditions[0]: expected a non-empty string'),
    ('filters', 'NodeReady', {'pressureConditions': ['Ready']},
     'args.pressureConditions[0]: Ready is always checked'),
    *[(section, name, {'x': 1}, 'args.x: unknown argument (allowed: none)') for section, name in NO_ARGUMENTS],
    ('filters', 'ResourceFit', {'ignoredResources': [1]},
     'args.ignoredResources[0]: expected a non-empty string'),
    ('filters', 'ResourceFit', {'ignoredResources': 'cpu'},
     'args.ignoredResources: expected a list of strings'),
    ('filters', 'ResourceFit', {'ignoredResourceGroups': ['a/b']},
     "args.ignoredResourceGroups[0]: 'a/b' is a group, it must not contain '/'"),
    ('filters', 'ResourceFit', {'ignoredResource': ['x']},
     'args.ignoredResource: unknown argument (allowed: ignoredResourceGroups, ignoredResources)'),
    ('filters', 'DeviceFit', {'strategy': 'x'},
     "args.strategy: 'x' is not one of binpack, spread, random, fgd"),
    ('filters', 'DeviceFit', {'strategy': 3},
     'args.strategy: 3 is not one of binpack, spread, random, fgd'),
    ('filters', 'DeviceFit', {'strategies': 3},
     'args.strategies: unknown argument (allowed: deviceClass, epoch, halfLife, learnOnly, measure, seed, strategy, workload)'),
    ('scores', 'DeviceAllocation', {'strategy': 'x'},
     "args.strategy: 'x' is not one of binpack, spread"),
    ('filters', 'UnsupportedConstraints', {'checks': ['x']},
     "args.checks[0]: 'x' is not a check this plugin knows (it has none left)"),
    ('filters', 'UnsupportedConstraints', {'checks': ['volumes']},
     "args.checks[0]: 'volumes' is not a check this plugin knows (it has none left)"),
    ('filters', 'UnsupportedConstraints', {'checks': 'x'},
     'args.checks: expected a list of strings'),
    ('filters', 'DynamicResources', {'bindingTimeout': '0.5s'},
     'args.bindingTimeout: must be from 1s to 604800s'),
    ('filters', 'DynamicResources', {'bindingTimeout': 'soon'},
     'args.bindingTimeout: expected a duration such as 30s, 2m or a number of seconds'),
    ('filters', 'DynamicResources', {'timeout': 1},
     'args.timeout: unknown argument (allowed: bindingTimeout)'),
    ('filters', 'VolumeBinding', {'bindTimeoutSeconds': 0},
     'args.bindTimeoutSeconds: must be an integer from 1 to 86400'),
    ('filters', 'VolumeBinding', {'bindTimeoutSeconds': True},
     'args.bindTimeoutSeconds: must be an integer from 1 to 86400'),
    ('filters', 'VolumeBinding', {'bindTimeoutSeconds': '5'},
     'args.bindTimeoutSeconds: must be an integer from 1 to 86400'),
    ('scores', 'VolumeBinding', {'shape': []},
     'args.shape: expected a non-empty list of {utilization, score}'),
    ('scores', 'VolumeBinding', {'shape': [3]},
     'args.shape[0]: expected a mapping'),
    ('scores', 'VolumeBinding', {'shape': [{'utilization': 0, 'score': 0, 'x': 1}]},
     'args.shape[0].x: unknown argument (allowed: score, utilization)'),
    ('scores', 'VolumeBinding', {'shape': [{'utilization': -1, 'score': 0}]},
     'args.shape[0].utilization: must be an integer from 0 to 100'),
    ('scores', 'VolumeBinding', {'shape': [{'utilization': 0, 'score': 11}]},
     'args.shape[0].score: must be an integer from 0 to 10'),
    ('scores', 'VolumeBinding', {'shape': [{'utilization': 50, 'score': 1}, {'utilization': 50, 'score': 2}]},
     "args.shape[1].utilization: must be greater than the previous point's"),
    ('scores', 'LeastAllocated', {'resources': {}},
     'args.resources: must name at least one resource'),
    ('scores', 'LeastAllocated', {'resources': []},
     'args.resources: expected a mapping'),
    ('scores', 'LeastAllocated', {'resources': {'cpu': 0}},
     'args.resources.cpu: must be an integer from 1 to 100'),
    ('scores', 'MostAllocated', {'resources': {'cpu': 1.5}},
     'args.resources.cpu: must be an integer from 1 to 100'),
    ('scores', 'BalancedAllocation', {'resources': []},
     'args.resources: must name at least one resource'),
    ('scores', 'BalancedAllocation', {'resources': 'cpu'},
     'args.resources: expected a list of strings'),
    ('scores', 'BalancedAllocation', {'resources': [2]},
     'args.resources[0]: expected a non-empty string'),
    ('scores', 'BalancedAllocation', {'resource': [2]},
     'args.resource: unknown argument (allowed: resources)'),
    ('filters', 'NodeLoad', {},
     "args: give a cpu or a memory threshold (percent of the node's capacity)"),
    ('filters', 'NodeLoad', {'cpu': 0},
     'args.cpu: must be a percentage above 0 and at most 100'),
    ('filters', 'NodeLoad', {'cpu': 'x'},
     'args.cpu: not a number'),
    ('filters', 'NodeLoad', {'memory': 101},
     'args.memory: must be a percentage above 0 and at most 100'),
    ('filters', 'NodeLoad', {'memory': True},
     'args.memory: not a number'),
    ('filters', 'NodeLoad', {'cpu': float("nan")},
     'args.cpu: not a number'),
    ('filters', 'NodeLoad', {'cpu': float("inf")},
     'args.cpu: not a finite number'),
    ('scores', 'TargetLoadPacking', {'targetUtilization': 0},
     'args.targetUtilization: must be an integer from 1 to 100'),
    ('scores', 'TargetLoadPacking', {'targetUtilization': 101},
     'args.targetUtilization: must be an integer from 1 to 100'),
    ('scores', 'TargetLoadPacking', {'defaultRequests': 3},
     'args.defaultRequests: expected a mapping'),
    ('scores', 'TargetLoadPacking', {'defaultRequests': {'memory': '1Gi'}},
     'args.defaultRequests.memory: unknown argument (allowed: cpu)'),
    ('scores', 'TargetLoadPacking', {'defaultRequests': {'cpu': 'lots'}},
     "args.defaultRequests.cpu: quantity 'lots' does not match the Kubernetes quantity format"),
    ('scores', 'TargetLoadPacking', {'defaultRequestsMultiplier': 'x'},
     'args.defaultRequestsMultiplier: not a number'),
    ('scores', 'TargetLoadPacking', {'defaultRequestsMultiplier': -1},
     'args.defaultRequestsMultiplier: must be at least 0'),
    ('scores', 'LoadVariationRiskBalancing', {'safeVarianceMargin': -1},
     'args.safeVarianceMargin: must be at least 0'),
    ('scores', 'LoadVariationRiskBalancing', {'safeVarianceSensitivity': 'x'},
     'args.safeVarianceSensitivity: not a number'),
    ('scores', 'LoadVariationRiskBalancing', {'safeVarianceSensitivity': -0.5},
     'args.safeVarianceSensitivity: must be at least 0'),
    ('filters', 'NodeLabels', {'rules': 3},
     'args.rules: expected a list of rules'),
    ('filters', 'NodeLabels', {'rules': [3]},
     'args.rules[0]: expected a mapping'),
    ('filters', 'NodeLabels', {'rules': [{}]},
     'args.rules[0]: a rule needs at least one require or forbid entry'),
    ('filters', 'NodeLabels', {'rules': [{'require': 3}]},
     'args.rules[0].require: expected a list of {label, values} entries'),
    ('filters', 'NodeLabels', {'rules': [{'require': [3]}]},
     'args.rules[0].require[0]: expected a mapping'),
    ('filters', 'NodeLabels', {'rules': [{'require': [{'values': ['a']}]}]},
     'args.rules[0].require[0].label: expected a non-empty string'),
    ('filters', 'NodeLabels', {'rules': [{'require': [{'label': 'a', 'values': []}]}]},
     'args.rules[0].require[0].values: must not be empty (omit it to mean any value)'),
    ('filters', 'NodeLabels', {'rules': [{'require': [{'label': 'a', 'valus': []}]}]},
     'args.rules[0].require[0].valus: unknown argument (allowed: label, values)'),
    ('filters', 'NodeLabels', {'rules': [{'forbid': [{'label': 'a'}], 'namespaces': 'x'}]},
     'args.rules[0].namespaces: expected a list of strings'),
    ('filters', 'NodeLabels', {'rules': [{'forbid': [{'label': 'a'}], 'excludedNamespaces': ['']}]},
     'args.rules[0].excludedNamespaces[0]: expected a non-empty string'),
    ('filters', 'NodeLabels', {'rules': [{'forbid': [{'label': 'a'}], 'podSelector': 3}]},
     'args.rules[0].podSelector: expected an object'),
    ('filters', 'NodeLabels', {'rules': [{'forbid': [{'label': 'a'}], 'podSelector': {'matchExpressions': [{'key': 'a', 'operator': 'Is'}]}}]},
     "args.rules[0].podSelector.matchExpressions[0].operator: 'Is' is not one of ['DoesNotExist', 'Exists', 'In', 'NotIn']"),
    ('filters', 'NodeLabels', {'rules': [{'forbid': [{'label': 'a'}], 'nmespaces': []}]},
     'args.rules[0].nmespaces: unknown argument (allowed: excludedNamespaces, forbid, namespaces, podSelector, require)'),
    ('scores', 'LabelPreference', {},
     'args.label: required; scores[0].args.values: required'),
    ('scores', 'LabelPreference', {'label': 'a'},
     'args.values: required'),
    ('scores', 'LabelPreference', {'label': '', 'values': {'a': 1}},
     'args.label: expected a non-empty string'),
    ('scores', 'LabelPreference', {'label': 'a', 'values': {}},
     'args.values: must name at least one label value'),
    ('scores', 'LabelPreference', {'label': 'a', 'values': []},
     'args.values: expected a mapping'),
    ('scores', 'LabelPreference', {'label': 'a', 'values': {'spot': 'x'}},
     'args.values.spot: not a number'),
    ('scores', 'LabelPreference', {'label': 'a', 'values': {'spot': -1}},
     'args.values.spot: must be at least 0'),
    ('scores', 'LabelPreference', {'label': 'a', 'values': {'spot': 1}, 'default': 'x'},
     'args.default: not a number'),
    ('scores', 'InterPodAffinity', {'hardPodAffinityWeight': 101},
     'args.hardPodAffinityWeight: must be an integer from 0 to 100'),
    ('scores', 'InterPodAffinity', {'hardPodAffinityWeight': -1},
     'args.hardPodAffinityWeight: must be an integer from 0 to 100'),
    ('scores', 'InterPodAffinity', {'ignorePreferredTermsOfExistingPods': 'yes'},
     'args.ignorePreferredTermsOfExistingPods: expected true or false'),
    ('filters', 'PodTopologySpread', {'defaultingType': 'x'},
     'args.defaultingType: must be System or List'),
    ('filters', 'PodTopologySpread', {'defaultConstraints': [{'maxSkew': 1, 'topologyKey': 'z'}]},
     'args.defaultConstraints: must be empty when defaultingType is System'),
    ('filters', 'PodTopologySpread', {'defaultingType': 'List', 'defaultConstraints': 3},
     'args.defaultConstraints: expected a list'),
    ('filters', 'PodTopologySpread', {'defaultingType': 'List', 'defaultConstraints': [3]},
     'args.defaultConstraints[0]: expected a mapping'),
    ('filters', 'PodTopologySpread', {'defaultingType': 'List', 'defaultConstraints': [{'maxSkew': 0, 'topologyKey': 'z'}]},
     'args.defaultConstraints[0].maxSkew: must be an integer from 1 to 2147483647'),
    ('filters', 'PodTopologySpread', {'defaultingType': 'List', 'defaultConstraints': [{'maxSkew': 1, 'topologyKey': ''}]},
     'args.defaultConstraints[0].topologyKey: expected a non-empty string'),
    ('filters', 'PodTopologySpread', {'defaultingType': 'List', 'defaultConstraints': [{'maxSkew': 1, 'topologyKey': 'z', 'whenUnsatisfiable': 'Never'}]},
     'args.defaultConstraints[0].whenUnsatisfiable: must be DoNotSchedule or ScheduleAnyway'),
    ('filters', 'PodTopologySpread', {'defaultingType': 'List', 'defaultConstraints': [{'maxSkew': 1, 'topologyKey': 'z', 'labelSelector': {}}]},
     'args.defaultConstraints[0].labelSelector: unknown argument (allowed: maxSkew, topologyKey, whenUnsatisfiable)'),
    ('scores', 'PodTopologySpread', {'defaultingType': 'x'},
     'args.defaultingType: must be System or List'),
    ('filters', 'NodeAffinity', {'addedAffinity': 3},
     'args.addedAffinity: expected a mapping'),
    ('filters', 'NodeAffinity', {'addedAffinity': {P: []}},
     f'args.addedAffinity.{P}: unknown argument (allowed: {R})'),
    ('filters', 'NodeAffinity', {'addedAffinity': {R: 3}},
     f'args.addedAffinity.{R}: expected a mapping'),
    ('filters', 'NodeAffinity', {'addedAffinity': {R: {'nodeSelectorTerms': []}}},
     f'args.addedAffinity.{R}.nodeSelectorTerms: expected a non-empty list of node selector terms'),
    ('filters', 'NodeAffinity', {'addedAffinity': {R: {'terms': []}}},
     f'args.addedAffinity.{R}.nodeSelectorTerms: expected a non-empty list of node selector terms; '
     f'filters[0].args.addedAffinity.{R}.terms: unknown argument (allowed: nodeSelectorTerms)'),
    ('filters', 'NodeAffinity', {'addedAffinity': {R: {'nodeSelectorTerms': [3]}}},
     f'args.addedAffinity.{R}.nodeSelectorTerms[0]: expected an object'),
    ('filters', 'NodeAffinity', {'addedAffinity': {R: {'nodeSelectorTerms': [{'matchExpressions': [{'key': 'a', 'operator': 'Is'}]}]}}},
     f"args.addedAffinity.{R}.nodeSelectorTerms[0].matchExpressions[0].operator: 'Is' is not one of ['DoesNotExist', 'Exists', 'Gt', 'In', 'Lt', 'NotIn']"),
    ('scores', 'PreferredNodeAffinity', {'addedAffinity': {R: {}}},
     f'args.addedAffinity.{R}: unknown argument (allowed: {P})'),
    ('scores', 'PreferredNodeAffinity', {'addedAffinity': {P: 3}},
     f'args.addedAffinity.{P}: expected a list of weighted terms'),
    ('scores', 'PreferredNodeAffinity', {'addedAffinity': {P: [3]}},
     f'args.addedAffinity.{P}[0]: expected a mapping'),
    ('scores', 'PreferredNodeAffinity', {'addedAffinity': {P: [{'weight': 0, 'preference': {}}]}},
     f'args.addedAffinity.{P}[0].weight: must be an integer from 1 to 100'),
    ('scores', 'PreferredNodeAffinity', {'addedAffinity': {P: [{'weight': 1, 'preference': 3}]}},
     f'args.addedAffinity.{P}[0].preference: expected an object'),
    ('scores', 'PreferredNodeAffinity', {'addedAffinity': {P: [{'weight': 1, 'preference': {'matchFields': [{'key': 'x', 'operator': 'In', 'values': ['a']}]}}]}},
     f'args.addedAffinity.{P}[0].preference.matchFields[0].key: only metadata.name is supported'),
    ('scores', 'PreferredNodeAffinity', {'addedAffinity': {P: [{'weight': 1, 'pref': {}}]}},
     f'args.addedAffinity.{P}[0].pref: unknown argument (allowed: preference, weight); '
     f'scores[0].args.addedAffinity.{P}[0].preference: expected an object'),
]


def _message(section: str, name: str, args: Any) -> str:
    with pytest.raises(PolicyError) as caught:
        load_policy({"apiVersion": "extender/v1alpha1", "kind": "Policy", section: [{"name": name, "args": args}]},
                    source="p.yaml")
    return str(caught.value)


@pytest.mark.parametrize(("section", "name", "args", "message"), CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_each_mistake_reads_as_before(section: str, name: str, args: Any, message: str) -> None:
    assert _message(section, name, args) == f"p.yaml: {section}[0].{message}"


#: The same checks where a plugin is built from its arguments directly (``from_args``): the
#: message without the entry's path, which the loader adds.
FROM_ARGS_CASES = [
    (ResourceFit, {"ignoredResources": "x"}, "ignoredResources: expected a list of strings"),
    (ResourceFit, {"ignoredResourceGroups": ["a/b"]}, "ignoredResourceGroups[0]: 'a/b' is a group, it must not contain '/'"),
    (ResourceFit, {"ignored": []}, "ignored: unknown argument (allowed: ignoredResourceGroups, ignoredResources)"),
    (NodeReady, {"pressureConditions": "MemoryPressure"}, "pressureConditions: expected a list of strings"),
    (NodeReady, {"pressureConditions": [1]}, "pressureConditions[0]: expected a non-empty string"),
    (NodeReady, {"pressureConditions": ["Ready"]}, "pressureConditions[0]: Ready is always checked"),
    (NodeReady, {"pressure": []}, "pressure: unknown argument (allowed: pressureConditions)"),
]


@pytest.mark.parametrize(("plugin", "args", "message"), FROM_ARGS_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(FROM_ARGS_CASES)])
def test_from_args_says_the_same_without_the_path(plugin: Any, args: Any, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        plugin.from_args(args)
    assert str(caught.value) == message


def test_mistakes_in_two_plugins_are_reported_together() -> None:
    policy = {"apiVersion": "extender/v1alpha1", "kind": "Policy",
              "filters": [{"name": "NodeReady", "args": {"pressureConditions": "x"}}],
              "scores": [{"name": "LeastAllocated", "args": {"resources": {"cpu": 0}}}]}
    with pytest.raises(PolicyError) as caught:
        load_policy(policy, source="p.yaml")
    assert str(caught.value) == ("p.yaml: filters[0].args.pressureConditions: expected a list of strings; "
                                 "scores[0].args.resources.cpu: must be an integer from 1 to 100")
