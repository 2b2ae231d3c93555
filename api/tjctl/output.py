"""Where tjctl writes, and jobs as -o asks: a table (wide), their manifests as JSON or YAML, or kubectl's names."""

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml
from rich.console import Console

from tjctl import display
from trainingjob.model import GROUP, SINGULAR, TrainingJob

RESOURCE = f"{SINGULAR}.{GROUP}"  # trainingjob.trainingjob.io, as kubectl names the kind
FORMATS = ("table", "wide", "json", "yaml", "name")
UNWRAPPED = 512  # columns of a console that is not a terminal: a table piped to grep is not wrapped at 80


class PipedConsole(Console):
    """A console whose reader may go away (tjctl list | head): BrokenPipeError, which main turns into exit 141 as
    for every other write, where rich's own console would exit 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def console(*, stderr: bool = False) -> Console:
    """A console for stdout or stderr: the terminal's width, or (piped, without $COLUMNS) wide enough for rows."""
    made = PipedConsole(stderr=stderr, highlight=False)
    if not made.is_terminal and not os.environ.get("COLUMNS"):
        made = PipedConsole(stderr=stderr, highlight=False, width=UNWRAPPED)
    return made


@dataclass(frozen=True)
class Ui:
    """stdout for what was asked for (tables, manifests, names, logs); stderr for errors and notes."""

    out: Console
    err: Console

    @classmethod
    def create(cls) -> "Ui":
        return cls(console(), console(stderr=True))

    def write(self, text: str) -> None:
        """Text as it is, no markup, no wrapping (manifests, logs), flushed so a pipe sees it now; what stdout's
        encoding cannot hold replaced (PYTHONIOENCODING=ascii), not an error."""
        file = self.out.file
        try:
            file.write(text)
        except UnicodeEncodeError:
            encoding = getattr(file, "encoding", None) or "utf-8"
            file.write(text.encode(encoding, errors="replace").decode(encoding))
        file.flush()

    def note(self, text: str) -> None:
        self.err.print(text, markup=False, soft_wrap=True)


def name_of(job: TrainingJob) -> str:
    """trainingjob.trainingjob.io/NAME, as kubectl -o name prints it."""
    return f"{RESOURCE}/{job.metadata.name}"


def manifest(job: TrainingJob) -> dict[str, Any]:
    """The job's manifest; of one the model refuses (an SDK StoredJob), the manifest as stored."""
    return job.to_manifest()


def suspended(job: TrainingJob) -> bool:
    """spec.runPolicy.suspend, read from the manifest: a job the model refuses has its spec as stored."""
    spec = manifest(job).get("spec")
    policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    return isinstance(policy, dict) and policy.get("suspend") is True


def as_list(manifests: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Several objects as kubectl prints them: a v1 List with items."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(manifests)}


def dump(document: Any, output: str) -> str:
    if output == "json":
        return json.dumps(document, indent=2) + "\n"
    return str(yaml.safe_dump(document, sort_keys=False))


def show_jobs(
    ui: Ui, jobs: Sequence[TrainingJob], output: str, *, one: bool = False, all_namespaces: bool = False
) -> None:
    """`jobs` as -o says; `one`: a single object (get NAME), not a List, and its result and goodput lines under the
    table."""
    if output == "name":
        ui.write("".join(name_of(job) + "\n" for job in jobs))
    elif output in ("json", "yaml"):
        manifests = [manifest(job) for job in jobs]
        ui.write(dump(manifests[0] if one and len(manifests) == 1 else as_list(manifests), output))
    else:
        manifests = [manifest(job) for job in jobs]
        now = datetime.now(UTC)
        ui.out.print(display.table(manifests, now, wide=output == "wide", namespaces=all_namespaces))
        result = display.result_of(manifests[0]) if one and manifests else ""
        if result:
            ui.out.print(f"result: {result}", markup=False)
        time = display.goodput_of(manifests[0]) if one and manifests else ""
        if time:
            ui.out.print(f"goodput: {time}", markup=False)
        pacing = display.pacing_of(manifests[0]) if one and manifests else ""
        if pacing:
            ui.out.print(f"checkpoints: {pacing}", markup=False)
        queued = display.queued_of(manifests[0]) if one and manifests else ""
        if queued:
            ui.out.print(f"queued: {queued}", markup=False)


def show_document(ui: Ui, document: Any, output: str) -> None:
    ui.write(dump(document, output))
