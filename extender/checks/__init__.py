"""Checks before a rollout and at start-up: configuration files and RBAC.

configs (the policy and KubeSchedulerConfiguration files, as kube-scheduler reads them),
permissions (what each mode may do in the API server: the single source of truth for
deploy/ and the preflight) and preflight (SelfSubjectAccessReviews for those permissions).
"""
