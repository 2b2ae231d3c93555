"""A trial's TrainingJob: the template with the trial's parameters filled in, named <sweep>-<number>, labelled with
the sweep and the trial, its parameters in an annotation, and controlled by the sweep (deleted with it)."""

import json
from collections.abc import Sequence
from typing import Any

from trainingjob.model import API_VERSION, KIND
from trainingjob.model.sweep import SWEEP_KIND, TrainingSweep
from trainingjob.model.sweep_fill import filled_spec
from trainingjob.model.sweep_status import Trial
from trainingjob.sweep.checkpoints import REMOVE_ANNOTATION, annotation
from trainingjob.sweep.trials import PARAMETERS_ANNOTATION, SWEEP_LABEL, TRIAL_LABEL

Manifest = dict[str, Any]


def trial_manifest(sweep: TrainingSweep, trial: Trial, removals: Sequence[str] = ()) -> Manifest:
    """The TrainingJob that runs `trial`, told to remove the checkpoint folders `removals` (sweep.checkpoints)."""
    template = sweep.spec.template
    meta = template.metadata
    spec = filled_spec(
        template.spec.model_dump(mode="json", by_alias=True, exclude_none=True), sweep.spec.parameters, trial.parameters
    )
    name = str(sweep.metadata.name)
    labels = {**((meta.labels if meta else None) or {}), SWEEP_LABEL: name, TRIAL_LABEL: str(trial.number)}
    own = {k: v for k, v in ((meta.annotations if meta else None) or {}).items() if k != REMOVE_ANNOTATION}
    annotations = {
        **own,
        PARAMETERS_ANNOTATION: json.dumps(trial.parameters),
        **annotation(removals),
    }
    metadata = {
        "name": trial.job_name,
        "namespace": sweep.metadata.namespace,
        "labels": labels,
        "annotations": annotations,
        "ownerReferences": [owner_reference(sweep)],
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def owner_reference(sweep: TrainingSweep) -> Manifest:
    """The sweep as the controller of a job it makes: the job goes with it."""
    return {
        "apiVersion": API_VERSION,
        "kind": SWEEP_KIND,
        "name": str(sweep.metadata.name),
        "uid": str(getattr(sweep.metadata, "uid", "") or ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
