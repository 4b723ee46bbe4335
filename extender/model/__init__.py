"""Read-only views of Kubernetes objects and resource arithmetic, built from plain JSON dicts."""
