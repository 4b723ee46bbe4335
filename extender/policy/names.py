"""Built-in plugin names, in one place so that policies, metrics and docs agree."""

SCHEDULING_GATES = "SchedulingGates"
NODE_READY = "NodeReady"
RESOURCE_FIT = "ResourceFit"
TAINT_TOLERATION = "TaintToleration"
NODE_AFFINITY = "NodeAffinity"
NODE_LABELS = "NodeLabels"
UNSUPPORTED_CONSTRAINTS = "UnsupportedConstraints"
DEVICE_FIT = "DeviceFit"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
BALANCED_ALLOCATION = "BalancedAllocation"
PREFERRED_NODE_AFFINITY = "PreferredNodeAffinity"
TAINT_PREFER_NO_SCHEDULE = "TaintPreferNoSchedule"
LABEL_PREFERENCE = "LabelPreference"
DEVICE_ALLOCATION = "DeviceAllocation"

# Not a plugin: the engine's own refusal for a node it cannot read.
NODE_UNUSABLE = "NodeUnusable"
