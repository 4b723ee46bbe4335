"""The standalone scheduler: its own loop for pods whose `spec.schedulerName` names it.

queueing (which pod next, backoff), hints (which waiting pods a cluster event may help,
from the plugins' own registrations), bind_pool (async binds), reporting (Events,
PodScheduled, logs, metrics), preemptor (DefaultPreemption's evictions, in the background),
claim_gate (DynamicResources' PreEnqueue), gang_scheduling (pod groups: PreEnqueue, the group cycle,
Permit), leader (Lease-based election), pending (the watch of pods to schedule), profiles
(one policy per schedulerName), standalone (the Scheduler: ties them together) and health
(/healthz, /readyz, /metrics). The pure cycle itself is extender/cycle.
"""
