"""The controller runtime: list/watch-fed stores, the reconcile queue, leader election, write pacing, metrics."""
