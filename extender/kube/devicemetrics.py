"""Per-node GPU gauges (allocated and free memory and cores, devices by health), from the cluster state.

Published by the live source's housekeeping tick, not on every pod event: a scrape every
few seconds only needs the latest figure, and the tick costs one dict look-up per node
plus the arithmetic for the nodes that publish an inventory.
"""

from __future__ import annotations

from extender import metrics
from extender.cluster.state import ClusterState
from extender.model.devices import Inventory, node_inventory, raw_annotations


class DeviceGauges:
    """Publishes one cluster state's device figures; remembers which nodes it published."""

    def __init__(self) -> None:
        self._published: set[str] = set()
        # node -> (NodeView, its Inventory or None, NodeDeviceUse) last seen
        self._last: dict[str, tuple[object, Inventory | None, object]] = {}

    def publish(self, state: ClusterState) -> None:
        """Set the gauges of every node with an inventory; zero and drop those of nodes gone.

        Nodes whose view and device use are the very objects of the last tick are skipped:
        both are replaced, never changed, so most ticks compute nothing at all. A view without
        an inventory is not asked for its device use: at 5,000 nodes without devices, a tick
        is one look-up per node."""
        seen = set()
        last: dict[str, tuple[object, Inventory | None, object]] = {}
        for info in state.all_node_infos():
            name, view = info.name, info.node
            previous = self._last.get(name)
            if previous is not None and previous[0] is view:
                inventory, last_use = previous[1], previous[2]
            else:
                inventory, last_use = node_inventory(raw_annotations(view.raw)), None
            if inventory is None:
                last[name] = (view, None, None)
                continue
            use = state.device_use(name)
            last[name] = (view, inventory, use)
            seen.add(name)
            if use is last_use and name in self._published:
                continue
            memory = cores = used_memory = used_cores = healthy = busy = 0
            for device in inventory.devices:
                if not device.healthy:
                    continue
                taken = use.used(device.id)
                healthy += 1
                busy += 1 if taken.pods else 0
                memory += device.memory
                cores += device.cores
                used_memory += min(taken.memory, device.memory)
                used_cores += min(taken.cores, device.cores)
            _set(name, memory, cores, used_memory, used_cores, healthy, len(inventory.devices) - healthy, busy)
        for node in self._published - seen:
            _set(node, 0, 0, 0, 0, 0, 0, 0)  # multiprocess mode keeps removed series: leave zeros
            for gauge, states in _STATES:
                for value in states:
                    gauge.remove(node, value)
        self._published = seen
        self._last = last


_STATES = ((metrics.DEVICE_MEMORY, ("allocated", "free")), (metrics.DEVICE_CORES, ("allocated", "free")),
           (metrics.DEVICE_COUNT, ("healthy", "unhealthy", "in-use")))


def _set(node: str, memory: int, cores: int, used_memory: int, used_cores: int, healthy: int,
         unhealthy: int, busy: int) -> None:
    metrics.DEVICE_MEMORY.labels(node=node, state="allocated").set(used_memory)
    metrics.DEVICE_MEMORY.labels(node=node, state="free").set(memory - used_memory)
    metrics.DEVICE_CORES.labels(node=node, state="allocated").set(used_cores)
    metrics.DEVICE_CORES.labels(node=node, state="free").set(cores - used_cores)
    metrics.DEVICE_COUNT.labels(node=node, state="healthy").set(healthy)
    metrics.DEVICE_COUNT.labels(node=node, state="unhealthy").set(unhealthy)
    metrics.DEVICE_COUNT.labels(node=node, state="in-use").set(busy)
