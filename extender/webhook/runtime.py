"""The webhook's per-process runtime: cluster state, its source, a binder and the current policy.

One per gunicorn worker (extender/webhook/app.py), built after fork. The pieces are the ones the
standalone scheduler and simulate assemble too (extender.cluster, extender.kube, the policy
holder of extender.startup), so "the same policy gives the same answer in all three" holds by
construction rather than by discipline.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from extender.checks.configs import webhook_policy_problems
from extender.cluster.memory_binder import MemoryBinder
from extender.cluster.snapshot import SnapshotSource
from extender.cluster.state import ClusterState
from extender.cycle.steps import Binder
from extender.errors import ExtenderError, PolicyError
from extender.kube import deviceledger
from extender.kube.binder import KubeBinder
from extender.kube.client import build_api_client, cluster_configured
from extender.kube.dra_source import ALL as ALL_DRA
from extender.kube.dra_source import CLASSES_ONLY
from extender.kube.source import KubeSource
from extender.policy import names
from extender.policy.engine import Engine, Policy
from extender.policy.reloading import FixedPolicy, PolicyHolder
from extender.settings import Settings, default_snapshot
from extender.startup import auto_fallback_reason, make_policy_holder
from extender.usage.service import UsageService
from extender.webhook.gang_holds import WebhookGangs

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

log = logging.getLogger(__name__)


class ClusterSource(Protocol):
    """What fills the cluster state: a snapshot file (cluster/snapshot.py `SnapshotSource`) or the
    API server's watches (kube/source.py `KubeSource`). Pods are watched only once a policy or a
    /bind needs them (webhook/verbs.py)."""

    @property
    def kind(self) -> str: ...

    @property
    def pods_watched(self) -> bool: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def start_pod_watch(self, why: str = ...) -> bool: ...

    def begin_pod_watch(self, why: str) -> bool: ...

    def pods_listed(self, timeout: float) -> bool: ...

    def refresh_pod(self, namespace: str, name: str) -> bool: ...


@dataclass
class Runtime:
    state: ClusterState
    source: ClusterSource
    binder: Binder
    policy: PolicyHolder | FixedPolicy
    api_client: ApiClient | None = None
    usage: UsageService | None = None  # node usage for the load-aware plugins, while a policy uses them
    gangs: WebhookGangs | None = None  # where the API server serves pod groups and /bind is enabled
    started: bool = field(default=False, init=False)

    @property
    def engine(self) -> Engine:
        return self.policy.engine

    def _services(self) -> list[UsageService | WebhookGangs]:
        """The optional services this process runs, in the order they start (they stop in reverse)."""
        return [service for service in (self.usage, self.gangs) if service is not None]

    def start(self) -> None:
        """The cluster state's source first, then the policy file's watch, then the services."""
        if self.started:
            return
        self.started = True
        self.source.start()
        self.policy.start_watching()
        for service in self._services():
            service.start()

    def drain(self) -> None:
        """The process is stopping: let go of what requests are waiting for (held gang binds)."""
        if self.gangs is not None:
            self.gangs.drain()

    def stop(self) -> None:
        """In the reverse order of start()."""
        for service in reversed(self._services()):
            service.stop()
        self.policy.stop_watching()
        self.source.stop()


def _watch_pods_for(policy: Policy, source: ClusterSource) -> None:
    """Before a reloaded policy that reads pods takes over, have them all (extender/kube/source.py)."""
    if policy.needs_pods and not source.pods_watched and not source.start_pod_watch():
        raise ExtenderError("stopped before the pods were listed")


def _refuse_for_webhook(policy: Policy) -> None:
    """The webhook (build_runtime's only user) cannot run some policies: PolicyError saying why."""
    problems = webhook_policy_problems(policy.source, policy.filters)
    if problems:
        raise PolicyError(*problems)


def choose_source(settings: Settings) -> str:
    """`auto` means the real API server when one is configured, else the embedded snapshot."""
    if settings.source != "auto":
        return settings.source
    if settings.snapshot:
        return "snapshot"
    return "kube" if settings.kubeconfig or cluster_configured() else "snapshot"


def build_runtime(settings: Settings) -> Runtime:
    """Assemble (not start) the runtime the settings describe."""
    state = ClusterState(assume_ttl=settings.assume_ttl)
    policy = make_policy_holder(settings.policy, settings.policy_mode)
    _refuse_for_webhook(policy.policy)
    policy.add_preparer(_refuse_for_webhook)  # a reload too
    kind = choose_source(settings)
    if kind == "snapshot":
        path = Path(settings.snapshot) if settings.snapshot else default_snapshot()
        if settings.source == "auto" and not settings.snapshot:
            log.warning("--source auto: %s; serving the demo snapshot %s instead (--source kube to "
                        "require a cluster)", auto_fallback_reason(), path)
        return Runtime(state, SnapshotSource(state, path), MemoryBinder(state), policy,
                       usage=UsageService(state, None, [policy]))
    if kind == "kube":
        api_client = build_api_client(settings.kubeconfig or None, settings.context or None)
        deviceledger.configure(api_client, namespace=settings.lease_namespace or None)
        # Pods are watched when the policy reads them; a webhook that binds starts the watch at
        # its first /bind (webhook/verbs.py), so one registered without bindVerb never pays for it.
        # DRA objects only when the policy lists DynamicResources: kube-scheduler allocates the
        # claims itself before it calls the webhook (docs/dra.md), so the default policy reads only
        # the DeviceClasses (which extended resources they serve, for /bind's resource check).
        dra_kinds = ALL_DRA if names.DYNAMIC_RESOURCES in policy.policy.filter_names else CLASSES_ONLY
        source = KubeSource(state, api_client, watch_pods=policy.policy.needs_pods, dra_kinds=dra_kinds)
        # Pod groups need the bind verb (members are held there); their first /filter starts the
        # pod watch as a first /bind does (webhook/verbs.py).
        gangs = WebhookGangs(state, api_client, hold_seconds=settings.gang_hold,
                             give_way_backoff=settings.gang_give_way_backoff,
                             lease_namespace=settings.lease_namespace or None) if settings.enable_bind else None
        policy.add_preparer(lambda new: _watch_pods_for(new, source))
        return Runtime(state, source, KubeBinder(api_client, state), policy, api_client,
                       usage=UsageService(state, api_client, [policy]),
                       gangs=gangs if gangs is not None and gangs.enabled else None)
    raise ExtenderError(f"unknown cluster source {kind!r}: use auto, kube or snapshot")
