"""The standalone scheduler: its own loop for pods whose `spec.schedulerName` names it.

queueing (which pod next, backoff), cycle (one pure scheduling decision), binding
(async binds), reporting (Events, PodScheduled, logs, metrics), leader (Lease-based
election), pending (the watch of pods to schedule), profiles (one policy per
schedulerName), scheduler (ties them together) and health (/healthz, /readyz, /metrics).
"""
