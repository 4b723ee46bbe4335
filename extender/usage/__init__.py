"""Node usage, fetched in the background and published into the cluster state for the load plugins.

    sources (metrics_api, prometheus, annotations) --fetch--> polling (one thread, every
    interval) --publish--> store (samples + recent placements) --table--> ClusterState.node_usage()

Requests never wait on a fetch: they read the store's latest published samples. A
source that is missing, failing or returning garbage degrades to "no data" (the load
plugins then change nothing), is logged once per state change, and shows in /readyz
and the extender_usage_* metrics. `service` follows the policies: the loop runs only
while a policy uses a load plugin, and restarts when `settings.usage` changes.
`offline` builds the same store from a snapshot for simulate and explain.
"""
