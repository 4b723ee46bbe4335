"""Dynamic Resource Allocation: pure models of resource.k8s.io/v1 objects (DeviceClass,
ResourceSlice, ResourceClaim, ResourceClaimTemplate), the CEL device selectors and the
structured allocator, as kube-scheduler v1.36.3 runs them. No HTTP, no Kubernetes client:
dicts in, decisions out, so the standalone scheduler, the webhook and simulate share them.
"""
