"""A pod's shared-GPU request (docs/devices.md), read once for DeviceFit, DeviceAllocation and
the GPU-sharing scorers: None for a pod without one, a Status naming what is malformed."""

from __future__ import annotations

from extender.errors import InvalidObject
from extender.model.devices import DeviceRequest, device_request, requests_devices
from extender.model.fields import as_object
from extender.model.pods import PodView
from extender.policy import names
from extender.policy.status import Code, Status

REASON_INVALID_REQUEST = "pod has an invalid GPU request"


def pod_device_request(pod: PodView) -> DeviceRequest | Status | None:
    """The pod's device request; None for a pod without one, a Status for a malformed one."""
    if not requests_devices(pod.requests):
        return None
    try:
        return device_request(as_object(pod.raw.get("spec"), "spec"), pod.annotations)
    except InvalidObject as exc:
        return Status(Code.UNRESOLVABLE, (REASON_INVALID_REQUEST,), str(exc), names.DEVICE_FIT)
