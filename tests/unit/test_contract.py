"""The operator's and the trainer's copies of their contract agree, name for name and code for code."""

import trainer.contract as trainer_side
import trainingjob.contract as operator_side


def test_both_sides_name_the_same_environment_variables() -> None:
    assert operator_side.ALL_VARIABLES == trainer_side.ALL_VARIABLES
    for name in operator_side.ALL_VARIABLES:
        assert name.isupper()


def test_both_sides_give_exit_codes_the_same_meaning() -> None:
    operator_codes = {code.name: code.value for code in operator_side.ExitCode}
    assert operator_codes == {code.name: code.value for code in trainer_side.ExitCode}


def test_both_sides_name_the_roles_alike() -> None:
    assert operator_side.ROLE_WORKER == trainer_side.ROLE_WORKER
    assert operator_side.ROLE_PS == trainer_side.ROLE_PS


def test_exit_codes_do_not_collide_with_signal_deaths() -> None:
    assert all(0 <= code < 128 for code in operator_side.ExitCode)
