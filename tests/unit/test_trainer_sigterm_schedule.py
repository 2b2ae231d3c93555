"""When DDP ranks next agree on SIGTERM: every ten fast steps, about every second of slow ones, every slow step."""

import pytest

from trainer.pacing import CONTROL_EVERY, AgreementSchedule

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("slowest_seconds_per_step", "steps_to_next"),
    [(0.0, CONTROL_EVERY), (0.001, CONTROL_EVERY), (0.1, CONTROL_EVERY), (0.25, 4), (0.5, 2), (1.0, 1), (30.0, 1)],
    ids=["instant", "fast", "tenth-second", "quarter-second", "half-second", "one-second", "very-slow"],
)
def test_the_next_agreement_is_about_a_second_away_and_at_most_ten_steps(
    slowest_seconds_per_step: float, steps_to_next: int
) -> None:
    schedule = AgreementSchedule(100)
    assert schedule.is_due(101) and not schedule.is_due(100)
    schedule.reschedule(101, slowest_seconds_per_step)
    assert schedule.next_step == 101 + steps_to_next
    assert schedule.is_due(101 + steps_to_next) and not schedule.is_due(100 + steps_to_next)
