"""Operator settings from TJ_OPERATOR_* variables, as the operator passes them to the planner."""

import pytest
from pydantic import ValidationError

from trainingjob.local.cluster import LOCAL_SETTINGS
from trainingjob.runtime.controller import plan_settings
from trainingjob.settings import DEFAULT_TRAINER_IMAGE, OperatorSettings

pytestmark = pytest.mark.fast

IMAGE_VARIABLE = "TJ_OPERATOR_DEFAULT_TRAINER_IMAGE"


def test_the_default_trainer_image_reaches_the_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(IMAGE_VARIABLE, "registry.example/trainer:2")
    assert plan_settings(OperatorSettings()).default_trainer_image == "registry.example/trainer:2"


def test_unset_it_is_the_built_in_trainer_in_the_operator_and_in_local_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IMAGE_VARIABLE, raising=False)
    assert plan_settings(OperatorSettings()).default_trainer_image == DEFAULT_TRAINER_IMAGE
    assert LOCAL_SETTINGS.default_trainer_image == DEFAULT_TRAINER_IMAGE


@pytest.mark.parametrize("image", [pytest.param("", id="empty"), pytest.param("trainer latest", id="space")])
def test_a_default_trainer_image_that_is_no_image_is_refused(monkeypatch: pytest.MonkeyPatch, image: str) -> None:
    monkeypatch.setenv(IMAGE_VARIABLE, image)
    with pytest.raises(ValidationError, match="default_trainer_image"):
        OperatorSettings()
