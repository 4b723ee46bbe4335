"""The engine run for people: explain one pod's decision, simulate a snapshot, report both.

explaining (a row per node: why refused, how scored; also POST /explain), simulating (the
standalone loop over an in-memory cluster) and report (the HTML page for both).
"""
