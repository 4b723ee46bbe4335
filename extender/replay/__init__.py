"""`extender replay`: a trace of pod arrivals replayed through the engine, one pod at a time, to
measure how much of a cluster's GPUs a policy puts to work (docs/replay.md).

traces.py reads the openb CSVs or a snapshot and a pod list; arrivals.py makes a seed's arrival
order, shuffled and tuned to a multiple of the GPUs, and its node names; runner.py runs one policy and
seed; curves.py bins the events into the published curve; report.py writes the table, the JSON
lines and the files under --out.
"""
