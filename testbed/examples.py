"""The shipped examples: TrainingJob manifests, and beside them what they need (claims, ConfigMaps).

A ConfigMap that carries an example's code is made from the code file beside it; `python -m testbed.examples`
rewrites them after the code changes (tests/unit/test_examples.py fails until then).
"""

from pathlib import Path

import yaml

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def has_kind(path: Path, kind: str) -> bool:
    return any(doc and doc.get("kind") == kind for doc in yaml.safe_load_all(path.read_text()))


JOB_EXAMPLES = [path for path in sorted(EXAMPLES.rglob("*.yaml")) if has_kind(path, "TrainingJob")]
SWEEP_EXAMPLES = [path for path in sorted(EXAMPLES.rglob("*.yaml")) if has_kind(path, "TrainingSweep")]

# ConfigMap manifest -> (its name, the code files it carries, what its opening comment says), all under examples/.
CODE_CONFIGMAPS = {
    "torchrun-script-configmap.yaml": (
        "train-script",
        ["train.py"],
        "The script torchrun-script.yaml runs (train.py beside this file): a plain torchrun program that knows\n"
        "nothing of TrainingJob. Apply this first, or make it from your own file:\n"
        "  kubectl create configmap train-script --from-file=examples/train.py",
    ),
    "image-classification/shapes-code.yaml": (
        "shapes-code",
        ["image-classification/shapes.py"],
        "The recipe shapes-ddp.yaml and shapes-ps.yaml train (shapes.py beside this file). Apply this first, or\n"
        "make it from the file:\n"
        "  kubectl create configmap shapes-code --from-file=examples/image-classification/shapes.py",
    ),
}


def render_configmap(manifest: str) -> str:
    """The ConfigMap manifest `manifest` as its code files make it."""
    name, files, comment = CODE_CONFIGMAPS[manifest]
    lines = [f"# {line}".rstrip() for line in comment.splitlines()]
    lines += ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}", "data:"]
    for file in files:
        lines.append(f"  {Path(file).name}: |")
        lines += [f"    {line}".rstrip() for line in (EXAMPLES / file).read_text().splitlines()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    for path in CODE_CONFIGMAPS:
        (EXAMPLES / path).write_text(render_configmap(path))
        print(f"wrote examples/{path}")
