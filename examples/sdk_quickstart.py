"""Submit a job, wait for it, print its metrics: the SDK from a notebook or a script.

From a checkout (after make venv):  bin/python examples/sdk_quickstart.py [MANIFEST]
With the wheel installed (pip install trainingjob):  python examples/sdk_quickstart.py [MANIFEST]

MANIFEST defaults to digits-ddp.yaml beside this file, whose checkpoint claim (digits-ddp-checkpoints.yaml) must
exist in the namespace first. The job gets a name of its own, new each run (sdk-quickstart-xxxxx), so it runs beside
the digits-ddp job the README and the chart's NOTES start."""

import sys
from pathlib import Path

import yaml

from trainingjob_sdk import connect

path = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name("digits-ddp.yaml")
manifest = yaml.safe_load(path.read_text())
manifest["metadata"] = {"generateName": "sdk-quickstart-"}  # the server adds five characters

client = connect()  # your kubeconfig and its namespace; or the REST API: TJCTL_SERVER and TJCTL_TOKEN
job = client.create(manifest)  # a file, YAML text, a dict or a TrainingJob
print(f"submitted {job.metadata.name} to {client.namespace}")
done = client.wait(str(job.metadata.name), timeout=1800)  # JobFailed if it fails, WaitTimeout if it takes longer
result = done.status.result if done.status else None
print(f"succeeded in attempt {done.status.attempt if done.status else '?'}: {result.metrics if result else {}}")
