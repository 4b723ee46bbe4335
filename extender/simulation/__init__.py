"""The engine run for people: simulate a snapshot and report it (the explanation of one pod's
decision is extender/explain, below the three modes).

simulating (the standalone loop over an in-memory cluster), placing (one pod placed,
preempting in memory), gangcycles (a pod group's cycle on the copy of the state), gangnotes
(what the report says of a group) and report (the HTML page).
"""
