"""The shipped examples: TrainingJob manifests, and beside them what they need (claims, ConfigMaps)."""

from pathlib import Path

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def is_job(path: Path) -> bool:
    return any(doc and doc.get("kind") == "TrainingJob" for doc in yaml.safe_load_all(path.read_text()))


JOB_EXAMPLES = [path for path in sorted(EXAMPLES.glob("*.yaml")) if is_job(path)]
