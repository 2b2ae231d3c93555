"""Every command the docs show, and where each is run, so the docs cannot drift from what works.

A command is a line of a fenced `console`/`bash`/`sh` block in README.md, docs/*.md, charts/README.md and
api/README.md; an indented command line of the chart's NOTES.txt (its template text: a variant behind a condition
is a command too); or an indented command line in a comment or docstring of examples/. Continuation lines are
joined and a trailing `# comment` dropped. Every command runs from the repository root, as the docs say.

Each command is either run by the tier test that RUNS names (tests/e2e, tests/integration, tests/node:
test_doc_commands.py) or named in ALLOWED with the reason it is not; tests/unit/test_doc_commands.py fails on a
command that is neither, and on an ALLOWED entry that no doc shows any more."""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARKDOWN = ("README.md", "docs/*.md", "charts/README.md", "api/README.md")
NOTES = "charts/trainingjob-operator/templates/NOTES.txt"
EXAMPLE_FILES = ("examples/**/*.yaml", "examples/**/*.py")
SHELL_FENCES = ("console", "bash", "sh", "shell")
TEMPLATE_VALUE = "{}"  # what a NOTES command shows for each {{ template expression }}
# The programs an example's comment may show: an indented line starting with one of them is a command.
PROGRAMS = ("kubectl", "bin/tjctl", "tjctl", "helm", "make", "python", "curl")


@dataclass(frozen=True)
class DocCommand:
    source: str  # the file, relative to the repository
    line: int  # where the command starts
    block: int  # the line of the fence (markdown), or 0: commands of one block or file run in order
    text: str

    def __str__(self) -> str:
        return f"{self.source}:{self.line}: {self.text}"


def without_comment(line: str) -> str:
    """The line up to a `#` that starts a shell comment (after a blank, outside quotes)."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def _joined(lines: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(first line number, command) with `\\` continuations joined; blank and comment-only lines dropped."""
    start, parts = 0, list[str]()
    for number, raw in lines:
        text = without_comment(raw.strip())
        if not parts:
            start = number
        if text.endswith("\\"):
            parts.append(text[:-1].strip())
            continue
        parts.append(text)
        command = " ".join(part for part in parts if part)
        parts = []
        if command:
            yield start, command


def markdown_commands(path: Path) -> Iterator[DocCommand]:
    fence, block, lines = "", 0, list[tuple[int, str]]()
    for number, line in enumerate(path.read_text().splitlines(), 1):
        opened = re.match(r"^\s*```(\w*)", line)
        if opened and not fence:
            fence, block, lines = opened.group(1) or "text", number, []
        elif opened:
            if fence in SHELL_FENCES:
                for start, text in _joined(lines):
                    yield DocCommand(_relative(path), start, block, text)
            fence = ""
        elif fence:
            lines.append((number, line))


def notes_commands(path: Path) -> Iterator[DocCommand]:
    """NOTES.txt's command lines: indented by five blanks (its prose by three), continuations by more."""
    for start, text in notes_lines(path.read_text()):
        yield DocCommand(_relative(path), start, 0, re.sub(r"\{\{.*?\}\}", TEMPLATE_VALUE, text))


def notes_lines(notes: str) -> Iterator[tuple[int, str]]:
    """(line number, command) of NOTES text, as templated or as rendered by `helm status`."""
    every = notes.splitlines()
    lines = [(n, line) for n, line in enumerate(every, 1) if re.match(r"^ {5}\S", line)]
    yield from _joined(_continued(every, lines))


def _continued(every: list[str], lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """`lines` plus the lines that continue them (a line ending in `\\` takes the next one, whatever its indent)."""
    kept = dict(lines)
    for first, text in lines:
        number, line = first, text
        while line.rstrip().endswith("\\") and number < len(every):
            number, line = number + 1, every[number]
            kept[number] = line
    return sorted(kept.items())


def example_commands(path: Path) -> Iterator[DocCommand]:
    """Indented command lines of an example's comments (`#   kubectl ...`), or of a Python file's docstrings."""
    lines: list[tuple[int, str]] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text.startswith("#") and path.suffix != ".py":
            continue  # a manifest's content (a ConfigMap's code) is not a command
        body = text[1:] if text.startswith("#") else line
        command = re.match(r"^ {2,}\S", body) is not None and body.strip().startswith(PROGRAMS)
        continued = bool(lines) and lines[-1][1].rstrip().endswith("\\") and lines[-1][0] == number - 1
        if command or continued:
            lines.append((number, body))
    for start, text in _joined(lines):
        yield DocCommand(_relative(path), start, 0, text)


def _relative(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _files(patterns: tuple[str, ...]) -> list[Path]:
    return sorted({path for pattern in patterns for path in REPO.glob(pattern)})


def commands() -> list[DocCommand]:
    found = [command for path in _files(MARKDOWN) for command in markdown_commands(path)]
    found += notes_commands(REPO / NOTES)
    found += [command for path in _files(EXAMPLE_FILES) for command in example_commands(path)]
    return found


# Where each command runs. The tier is the test module that runs it (tests/<tier>/test_doc_commands.py): `e2e`
# (this machine, no cluster), `integration` (a control plane with the CRDs installed, the block's own unless all
# its commands stay `in_a_namespace`: the docs' "your cluster", also their dev cluster), `node` (the node tier
# with the chart installed as the README does: the demo cluster). A command that follows (`-w`, a watch) is
# stopped once its output matches `until`; one that serves (a port-forward, `make run-api`) stays in the
# background once its output matches `serves`; `expect` must be in the output of the others, which must exit 0.
# The first rule whose `source` (when it names one) and `pattern` match a command decides.
@dataclass(frozen=True)
class Run:
    tier: str
    pattern: str
    source: str = ""
    until: str = ""
    serves: str = ""
    expect: str = ""
    timeout: float = 300
    makes_its_own_cluster: bool = False
    in_a_namespace: bool = False  # touches only the kubeconfig's namespace: a block of such shares a plane
    undo: str = ""  # a command that puts things back, run when the block ends however it ended


A_ROW = r"(?m)^(?!NAME\s)\S+\s"  # a `kubectl get` row below the header
ANY = r"\S+"
RUNS = (
    # On this machine.
    Run("e2e", r"make demo", expect=r"Restarting in place as attempt 2"),
    Run("e2e", r"bin/tjctl run examples/image-classification/\S+\.yaml", expect=r"result: accuracy (0\.9|1\.0)"),
    Run("e2e", r"bin/tjctl run examples/\S+\.yaml( --kill \S+)?", expect=r"\| Succeeded \|"),
    Run("e2e", r"source <\(bin/tjctl completion bash\)"),
    # The demo cluster and its notes, the dashboard's doc, and the README's tour of tjctl on a real node.
    Run("node", r"export KUBECONFIG=\$PWD/\.demo-cluster/kubeconfig PATH=\$PWD/\.demo-cluster/bin:\$PATH"),
    Run("node", r"kubectl get tj,pods -n demo"),
    Run("node", r"helm status trainingjob -n trainingjob-system", expect=r"NOTES:"),
    Run("node", r"kubectl get tj -n \S+ -w", source=NOTES, until=r"\sSucceeded\s", timeout=600),
    Run("node", r"kubectl .*port-forward service/\S+ 8000:\S+", serves=r"Forwarding from 127\.0\.0\.1:"),
    Run("node", r"curl --cacert ca\.crt .*/trainingjobs", source=NOTES, expect=r'"digits-ddp"'),
    Run(
        "node",
        r'tjctl --server https://127\.0\.0\.1:8000 --cacert ca\.crt --token "\$TOKEN" -n \S+ list',
        source=NOTES,
        expect=r"digits-ddp",
    ),
    Run("node", r"kubectl -n \S+ create (serviceaccount|rolebinding|token) .*"),
    Run("node", r"TOKEN=\$\(kubectl -n \S+ create token tj-user\S*( --audience \S+)?\)", source=NOTES),
    Run("node", r"kubectl .*", source=NOTES),
    Run("node", r"export KUBECONFIG=\$PWD/\.dev/kubeconfig", source="README.md"),
    Run("node", r"kubectl apply -f examples/digits-ddp-checkpoints\.yaml", source="README.md"),
    Run("node", r"bin/tjctl (?!run |completion ).*", source="README.md", timeout=600),
    # A cluster: the docs' commands against a control plane (pods do not run: nothing here waits for them).
    Run("integration", r"kubectl apply -f examples/\S+( -f examples/\S+)*", in_a_namespace=True),
    Run("integration", r"kubectl create configmap \S+ --from-file=examples/\S+", in_a_namespace=True),
    Run("integration", r"kubectl get tj( \S+)? -w", until=A_ROW, in_a_namespace=True),
    Run("integration", r"kubectl get tj shapes-ddp -o wide", expect=r"shapes-ddp", in_a_namespace=True),
    Run("integration", r"kubectl (apply|create) .*"),
    Run("integration", r"helm (install|template) trainingjob charts/trainingjob-operator .*"),
    Run("integration", r"make dev-cluster", makes_its_own_cluster=True, undo="make dev-cluster-down"),
    Run("integration", r"kubectl --kubeconfig \.dev/kubeconfig get nodes", expect=r"gpu-node-0"),
    Run("integration", r"export PATH=\$PWD/\.dev/bin:\$PATH"),
    Run("integration", r"make dev-cluster-down"),
    Run("integration", r"make run-api", serves=r"Application startup complete"),
    Run("integration", r"TOKEN=\$\(kubectl --kubeconfig \.dev/kubeconfig create token tj-dev .*\)"),
    Run("integration", r"curl .*/api/v1/namespaces/default/trainingjobs", expect=r'"digits-ddp"|"items"'),
)

_PACKAGE_TIER = (
    "the package tier builds the wheel through its sdist and installs it in clean virtual environments "
    "(tests/package/test_wheel.py; the version in the file name is checked by tests/unit/test_doc_commands.py)"
)
ALLOWED = {
    "make test": "the whole suite, this test among it",
    "make dist": _PACKAGE_TIER,
    "pip install 'dist/trainingjob-0.2.0-py3-none-any.whl'": _PACKAGE_TIER,
    "pip install 'dist/trainingjob-0.2.0-py3-none-any.whl[trainer]'": _PACKAGE_TIER,
    "tjctl --help": _PACKAGE_TIER,
    "make dist && pip install dist/trainingjob-*.whl": _PACKAGE_TIER,
    "make venv": "make demo and make test make it first; the e2e tier runs make demo as the README shows it",
    "bin/python examples/sdk_quickstart.py": (
        "tests/node/test_sdk.py runs examples/sdk_quickstart.py against the node tier's REST API and follows the job "
        "it submitted to the end"
    ),
    "bin/tjctl sweep run examples/digits-sweep.yaml": (
        "tests/e2e/test_local_sweep.py runs this sweep with tjctl sweep run and checks its ranking; a second "
        "run of a minute would prove nothing more"
    ),
    "kubectl -n {} create role tj-user --verb=get,list,watch,create,patch,delete "
    "--resource=trainingjobs.trainingjob.io,trainingsweeps.trainingjob.io": (
        "the notes' variant without the chart's aggregated roles (rbac.aggregateToDefaultRoles=false); the node "
        "tier runs the default install's, which binds those roles"
    ),
    "kubectl -n {} create rolebinding tj-user --role=tj-user --serviceaccount={}:tj-user": (
        "the notes' variant without the chart's aggregated roles, as above"
    ),
    'curl -H "Authorization: Bearer $TOKEN" {}://{}:8000/api/v1/namespaces/{}/trainingjobs': (
        "the notes' variant for api.tls.mode=none (plain HTTP behind a proxy); the node tier runs the default "
        "install's, HTTPS with the chart's CA"
    ),
    'tjctl --server {}://{}:8000 --token "$TOKEN" -n {} list': "the notes' variant for api.tls.mode=none, as above",
    'curl --cacert ca.crt --connect-to {}:8000:127.0.0.1:8000 -H "Authorization: Bearer $TOKEN" '
    "{}://{}:8000/api/v1/namespaces/{}/trainingjobs": (
        "the notes' variant for api.tls.mode=certManager (the cluster's issuer names only the Service); the node "
        "tier runs the default install's, whose certificate names 127.0.0.1"
    ),
}


def how(command: DocCommand) -> Run | str | None:
    """The rule that runs `command`, the reason it is not run, or None when the table has neither."""
    if command.text in ALLOWED:
        return ALLOWED[command.text]
    for rule in RUNS:
        if rule.source in ("", command.source) and re.fullmatch(rule.pattern, command.text):
            return rule
    return None


def distinct(tier: str) -> list[DocCommand]:
    """The commands `tier` runs, each text once (where the docs first show it)."""
    first: dict[str, DocCommand] = {}
    for commands_of_block in blocks(tier).values():
        for command in commands_of_block:
            first.setdefault(command.text, command)
    return list(first.values())


def blocks(tier: str) -> dict[str, list[DocCommand]]:
    """The commands `tier` runs, by block ("README.md:268"), in the order the docs show them."""
    found: dict[str, list[DocCommand]] = {}
    for command in commands():
        rule = how(command)
        if isinstance(rule, Run) and rule.tier == tier:
            found.setdefault(f"{command.source}:{command.block}", []).append(command)
    return found
