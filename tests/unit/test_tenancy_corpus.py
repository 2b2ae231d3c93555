"""The hostile corpus is about the tenancy policy, not the schema: every manifest in it is a valid TrainingJob, so
only the chart's policy stands between it and pods that reach beyond the job (tests/integration/test_tenancy_policy.py
proves the policy refuses it)."""

import pytest
from tests.support.corpus_hostile import HONEST, HOSTILE, PREFIXED
from tests.support.corpus_trainingjob import Case

from trainingjob.model import TrainingJob

pytestmark = pytest.mark.fast
CASES = HOSTILE + HONEST + PREFIXED


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_model_admits_it_so_the_policy_must_judge(case: Case) -> None:
    TrainingJob.from_manifest({**case.manifest, "metadata": {"name": "corpus", "namespace": "ns"}})


def test_every_refusal_names_a_field_of_the_job() -> None:
    assert all(c.field and c.field.startswith("spec.") for c in HOSTILE)
    assert len({c.id for c in CASES}) == len(CASES)
