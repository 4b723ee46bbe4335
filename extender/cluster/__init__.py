"""Cluster state and its adapters: watch sources (kube, snapshot) and binders (kube, memory)."""
