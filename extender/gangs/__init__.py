"""Gang scheduling, pure: who may be tried, who waits at Permit, when a group is released or sent back.

`coordinator` keeps the members of every pod group and their holds (time injected, thread-safe,
no I/O); `fitting` answers "can the members still to place fit at all" for the webhook's filter;
`topology` gives the candidate node sets of a group with a topology constraint; the order of a
group cycle's members and its choice of domain are `extender.cycle.group`'s (for the standalone
scheduler and simulate); `ledger` is the webhook's cross-process count of held members, as a Lease document. The adapters
(the standalone queue and Permit, the webhook's filter and bind, simulate) feed them; docs/gangs.md
says which kube-scheduler and Coscheduling facts each rule follows.
"""
