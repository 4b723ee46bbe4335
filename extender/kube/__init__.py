"""Everything that speaks to the API server: the client and its kept-alive connections, the
reflectors that feed the cluster state, the binder, Events, evictions, and the bind-time
work done through the API (volume binding, the device ledger)."""
