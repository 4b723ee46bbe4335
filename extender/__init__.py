"""A Kubernetes scheduler extender, standalone scheduler and simulator built on one policy engine."""

__version__ = "0.1.0"
