"""The cluster state in memory (nodes, pods, volumes, devices, with their indexes), snapshot
files, and the in-memory binder of simulate; no API server here (that is extender/kube)."""
