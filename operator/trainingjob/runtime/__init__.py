"""The controller runtime: what turns the pure planner into a running operator. controller.py puts it together;
kopf runs its lifecycle (operator.py). It runs in four execution contexts:

    apiserver ──watch──▶ (1) informer threads ──Store.apply──▶ memory.Stores ◀──read── (3) reconcile threads
                          one per kind: jobs, pods,   │                                 at most `workers` jobs
                          Services, sweeps, trials    │ wake(keys)                      (+2 sweeps) at once:
                                                      ▼ call_soon_threadsafe            reconcile.job / .sweep
                         (2) the asyncio loop (kopf's)                                        │
                          queue.ReconcileQueue: a task per woken job                          │ create/delete/
                          (batch, leader gate, backoff) ──InFlight.run───────▶ (3)           │ ungate pods
                          leader.lead: renew the Lease, open or shut the gate                 ▼
                          metrics_server: /metrics, /healthz      (4) the write pool (kube.job_cluster, tj-write)
                                                                       every job's parallel writes, paced by
    apiserver ◀──────────────────────────── writes ─────────────────── one kube.writes.Pacer (429 halves it)
                                     answers go back into the Stores (write-through: Stores.saw)

(1) Informer threads (kube.watch.Informer): list, then watch, each kind; what changed wakes the jobs (or sweeps) it
    belongs to. They touch only their Store (its lock) and the loop (call_soon_threadsafe).
(2) The asyncio loop: kopf's startup and cleanup hooks, one queue task per woken job, leader election, the metrics
    port. Nothing on it blocks: reconciles go to threads of their own (in_flight.InFlight), Lease calls to the
    loop's executor, which reconciles never fill, so /healthz stops answering only when the loop itself is wedged.
(3) Reconcile threads: one job's observe -> plan -> act (reconcile.job), reading the Stores (cached.py), writing
    through the apiserver adapters (kube.job_cluster, kube.sweep_cluster). A job is never reconciled twice at once.
(4) The write pool: one reconcile's many pod writes in parallel, at most `max_writes_in_flight` in flight across
    every job (kube.writes), so a 1,024-rank gang's creations leave room for a small job's.
"""
