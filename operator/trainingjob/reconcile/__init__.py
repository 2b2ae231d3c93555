"""One pass over a Cluster port: observe once, plan, act. Jobs (job.py) and sweeps (sweep.py)."""
