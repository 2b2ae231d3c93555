"""The operator's garbage collector. Its informer caches hold every pod of every job (10,240 for one large gang), and
a reconcile of a gang allocates objects for each of them, so at Python's default thresholds (700, 10, 10) the
collector runs often and scans large generations: about a fifth of a 10,240-rank gang's reconcile
(bench/bench_plan_scale.py: 0.80x of the time with these thresholds, alternately in one run). Fewer, larger young
collections cost less; cyclic garbage lives a little longer, and the caches are almost all of the heap anyway."""

import gc

THRESHOLDS = (50_000, 20, 100)


def tune() -> None:
    gc.set_threshold(*THRESHOLDS)
