"""Running a model-based test: hypothesis settings for long stateful runs, a seed that replays, and a summary of
what the run explored. TJ_MODEL_SEED, TJ_MODEL_EXAMPLES and TJ_MODEL_STEPS override a test's defaults."""

import os
from collections import Counter

from hypothesis import HealthCheck, seed, settings
from hypothesis.stateful import RuleBasedStateMachine, get_state_machine_test


def knob(name: str, default: int) -> int:
    """TJ_MODEL_<name> from the environment, else the test's default."""
    return int(os.environ.get(f"TJ_MODEL_{name}", str(default)))


def run_model(
    machine: type[RuleBasedStateMachine], *, seed_value: int, examples: int, steps: int, totals: Counter[str]
) -> None:
    """Run the state machine's sequences; on a failure, print how to replay it; then what the run explored."""
    run_settings = settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=True,
    )
    print(f"{machine.__name__}: TJ_MODEL_SEED={seed_value}, {examples} sequences of up to {steps} steps")
    try:
        seed(seed_value)(get_state_machine_test(machine, settings=run_settings))()
    except BaseException:
        print(f"the failing run replays with TJ_MODEL_SEED={seed_value} TJ_MODEL_EXAMPLES={examples}")
        raise
    print("explored: " + ", ".join(f"{key} {value}" for key, value in sorted(totals.items())))
