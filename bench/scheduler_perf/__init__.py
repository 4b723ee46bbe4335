"""kube-scheduler's scheduler_perf corpus as our benchmark (python -m bench scheduler-perf).

The workloads are read at run time from the kubernetes v1.36.3 source in the Go module
cache (test/integration/scheduler_perf/**/performance-config.yaml and their templates),
never copied here. ``corpus`` reads and resolves them, ``executor`` runs their operations
against a real control plane, ``informer`` watches the pods and measures the throughput as
scheduler_perf's util.go does, ``schedulers`` starts kube-scheduler or ``extender
schedule``, ``invariants`` checks the final cluster, ``startup`` times a cold start on a
big cluster and ``runner`` is the command line.
"""
