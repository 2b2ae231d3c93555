"""Builders of the largest TrainingJobs the size budgets allow (operator/trainingjob/model/budget.py), and of ones
just over them: shared by the tests of the budgets and the memory benchmark (bench/bench_sizes.py), which may not
import tests."""

from typing import Any

from trainingjob.model import API_VERSION, KIND, TrainingJob
from trainingjob.model.budget import ROLE_ITEMS_MAX, ROLE_TEXT_MAX, SPEC_MAX_BYTES, json_size, role_text

Manifest = dict[str, Any]
CONFIG_MAX_BYTES = 32 * 1024
ENV_VALUE_MAX = 32 * 1024
ENV_ITEMS_MAX = 128
CONTAINERS_MAX = 8  # init containers, and sidecars, per role


def job_manifest(name: str, *, trainer: Manifest | None = None, mode: str = "DDP", **spec: Any) -> Manifest:
    """A TrainingJob with these spec fields (camelCase); `trainer`, when given, is the built-in trainer's."""
    body = {"mode": mode, **spec, **({"trainer": trainer} if trainer is not None else {})}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": body}


def _tiny_env(count: int) -> list[Manifest]:
    return [{"name": f"E{i}", "value": ""} for i in range(count)]


def text_env(chars: int, prefix: str = "V") -> list[Manifest]:
    """Environment variables whose names and values take exactly `chars` characters (role_text counts them)."""
    env: list[Manifest] = []
    while chars > 0:
        name = f"{prefix}{len(env)}"
        value = "x" * max(0, min(ENV_VALUE_MAX, chars - len(name)))
        env.append({"name": name, "value": value})
        chars -= len(name) + len(value)
    assert chars == 0, "too few characters left for a variable's name"
    return env


def _padded_config() -> Manifest:
    """A trainer config of exactly CONFIG_MAX_BYTES as compact JSON: free-form, outside the roles' text."""
    return {"pad": "c" * (CONFIG_MAX_BYTES - len('{"pad":""}'))}


def _spec_size(manifest: Manifest) -> int:
    """The spec's size as the model writes it (its defaults in): what SPEC_MAX_BYTES bounds."""
    spec = TrainingJob.from_manifest(manifest).spec
    return json_size(spec.model_dump(mode="json", by_alias=True, exclude_none=True))


def largest_job(name: str = "largest", *, extra: int = 0) -> Manifest:
    """The largest job the budgets accept: a ParameterServer job whose workers' text is ROLE_TEXT_MAX, its trainer's
    config 32 KiB, and the parameter servers' text what brings the spec to exactly SPEC_MAX_BYTES (as JSON, its
    defaults in). `extra` adds characters to the parameter servers' last variable: 1 is one byte over."""
    workers = {"replicas": 4, "env": text_env(ROLE_TEXT_MAX, "W")}
    trainer = {"entrypoint": "recipe:build", "steps": 1000, "config": _padded_config()}
    servers = {"replicas": 1, "env": [{"name": "P0", "value": ""}]}
    manifest = job_manifest(name, mode="ParameterServer", trainer=trainer, workers=workers, parameterServers=servers)
    missing = SPEC_MAX_BYTES - _spec_size(manifest)
    assert 0 <= missing <= ENV_VALUE_MAX, missing
    manifest["spec"]["parameterServers"]["env"][0]["value"] = "p" * (missing + extra)
    return manifest


def with_role_items(role: str, count: int) -> Manifest:
    """A job whose `role` (workers, or the parameter servers of a ParameterServer job) runs the command sh and has
    `count` items in all: its command, then one-letter variables, 128 in each of its containers (up to 8 sidecars)."""
    body: Manifest = {"replicas": 1, "command": ["sh"], "env": _tiny_env(min(ENV_ITEMS_MAX, count - 1))}
    left = count - 1 - len(body["env"])
    sidecars: list[Manifest] = []
    while left > 0:
        sidecars.append(
            {"name": f"side{len(sidecars)}", "image": "busybox", "env": _tiny_env(min(ENV_ITEMS_MAX, left))}
        )
        left -= len(sidecars[-1]["env"])
    body["sidecars"] = sidecars
    if role == "workers":
        return job_manifest("itemy", workers=body)
    return job_manifest("itemy", mode="ParameterServer", workers={"replicas": 1, "command": ["sh"]}, **{role: body})


def many_small_parts(name: str = "many-parts") -> Manifest:
    """A job within the budgets shaped to cost the most memory once parsed: both roles with ROLE_ITEMS_MAX items,
    every one a variable of its own (an object), the rest of the byte budget in the trainer's config and the workers'
    and parameter servers' variables."""

    def role(replicas: int) -> Manifest:
        sidecars = [
            {"name": f"side{i}", "image": "busybox", "env": _tiny_env(ENV_ITEMS_MAX)}
            for i in range(ROLE_ITEMS_MAX // ENV_ITEMS_MAX - 1)
        ]
        return {"replicas": replicas, "env": _tiny_env(ENV_ITEMS_MAX), "sidecars": sidecars}

    trainer = {"entrypoint": "recipe:build", "steps": 1000, "config": _padded_config()}
    manifest = job_manifest(name, mode="ParameterServer", trainer=trainer, workers=role(4), parameterServers=role(1))
    missing = SPEC_MAX_BYTES - _spec_size(manifest)
    for role_name in ("workers", "parameterServers"):  # the rest in text: each character one byte more
        role_spec = manifest["spec"][role_name]
        room = ROLE_TEXT_MAX - role_text(role_spec)
        for variable in role_spec["env"]:
            variable["value"] = "v" * min(missing, room, ENV_VALUE_MAX)
            missing, room = missing - len(variable["value"]), room - len(variable["value"])
    assert missing == 0, missing
    return manifest


def smallest_job(name: str = "smallest") -> Manifest:
    """The baseline: the built-in trainer on two workers, nothing else."""
    return job_manifest(name, trainer={"steps": 100}, workers={"replicas": 2})


def _pieces(chars: int, size: int = 4000) -> list[int]:
    """Lengths of at most size + 10 that add up to `chars`, none under 10."""
    pieces = [size] * (chars // size) + [chars % size]
    if pieces[-1] < 10 and len(pieces) > 1:
        pieces[0] += pieces.pop()
    return pieces


WHERE = ("env", "args", "sidecar", "annotations")


def with_role_text(role: str, where: str, chars: int) -> Manifest:
    """A job whose `role` (workers, or the parameter servers of a ParameterServer job) runs the command sh and
    carries the rest of `chars` characters of text in `where`, one of WHERE: its env, its args, a sidecar's args
    or its pods' annotations."""
    text = chars - len("sh")
    body: Manifest = {"replicas": 1, "command": ["sh"]}
    if where == "env":
        body["env"] = text_env(text)
    elif where == "args":
        body["args"] = ["a" * n for n in _pieces(text)]
    elif where == "sidecar":
        body["sidecars"] = [{"name": "shipper", "image": "busybox", "args": ["s" * n for n in _pieces(text)]}]
    else:
        pieces = _pieces(text)
        body["podMetadata"] = {"annotations": {f"k{i}": "n" * (n - len(f"k{i}")) for i, n in enumerate(pieces)}}
    if role == "workers":
        return job_manifest("texty", workers=body)
    return job_manifest("texty", mode="ParameterServer", workers={"replicas": 1, "command": ["sh"]}, **{role: body})
