"""TrainingSweeps: the pure sweep planner. A sweep's trials are TrainingJobs it controls; every reconcile rebuilds
the search (an Optuna study) from the sweep's status and those jobs, decides (plan.py), and the operator writes:
the status first, then stops pruned trials' jobs, then creates new trials' jobs.

    space.py      the search space as Optuna distributions, and as a grid
    study.py      the Optuna study rebuilt from the trials; the sampler and pruner the spec asks for
    sampling.py   the next trials' parameters
    pruning.py    which running trials to stop early
    trials.py     a trial's state from its job
    summary.py    the finished trials listed, and the older ones summarised
    learned.py    the summarised trials' records, which the search and early stopping learn from
    checkpoints.py  which finished trials' checkpoint folders the next trials remove
    sweeper.py    the job that removes the last trials' folders, once every trial has finished
    jobs.py       a trial's TrainingJob manifest
    plan.py       the decision
"""
