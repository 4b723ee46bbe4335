"""The extender webhook: a Flask app serving kube-scheduler's extender verbs."""

from extender.webhook.app import create_app

__all__ = ["create_app"]
