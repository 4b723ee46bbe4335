"""Built-in plugin names, in one place so that policies, metrics and docs agree."""

SCHEDULING_GATES = "SchedulingGates"
NODE_READY = "NodeReady"
RESOURCE_FIT = "ResourceFit"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_LABELS = "NodeLabels"
UNSUPPORTED_CONSTRAINTS = "UnsupportedConstraints"
# kube-scheduler's names: each is both a filter and a scorer there, and here.
INTER_POD_AFFINITY = "InterPodAffinity"
POD_TOPOLOGY_SPREAD = "PodTopologySpread"
NODE_PORTS = "NodePorts"
NODE_LOAD = "NodeLoad"
VOLUME_RESTRICTIONS = "VolumeRestrictions"
NODE_VOLUME_LIMITS = "NodeVolumeLimits"
VOLUME_BINDING = "VolumeBinding"  # also an opt-in scorer (kube-scheduler's VolumeBinding Score)
VOLUME_ZONE = "VolumeZone"
DYNAMIC_RESOURCES = "DynamicResources"  # a filter and a scorer, as in kube-scheduler
DEVICE_FIT = "DeviceFit"
NODE_DECLARED_FEATURES = "NodeDeclaredFeatures"  # opt-in: kube-scheduler v1.36 runs it behind its gate

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
BALANCED_ALLOCATION = "BalancedAllocation"
PREFERRED_NODE_AFFINITY = "PreferredNodeAffinity"
TAINT_PREFER_NO_SCHEDULE = "TaintPreferNoSchedule"
LABEL_PREFERENCE = "LabelPreference"
TARGET_LOAD_PACKING = "TargetLoadPacking"
LOAD_VARIATION_RISK_BALANCING = "LoadVariationRiskBalancing"
DEVICE_ALLOCATION = "DeviceAllocation"

# Not a plugin: the engine's own refusal for a node it cannot read.
NODE_UNUSABLE = "NodeUnusable"
