"""Every command the docs show is run by a tier's test or allowed with a reason (tests/support/doc_commands.py),
and the commands named inline in prose name real tjctl commands and make targets."""

import re
from pathlib import Path

import pytest
from tests.support import doc_commands
from tests.support.doc_commands import ALLOWED, NOTES, REPO, RUNS, DocCommand, Run, how

from tjctl.cli import build_parser
from trainingjob import __version__

pytestmark = pytest.mark.fast


def test_every_command_in_the_docs_is_run_by_a_tier_or_allowed_with_a_reason() -> None:
    unclaimed = [str(command) for command in doc_commands.commands() if how(command) is None]
    assert not unclaimed, (
        "these commands of the docs are neither run nor allowed: add a rule to RUNS (and see that the tier's "
        "test_doc_commands.py runs it) or an entry with a reason to ALLOWED in tests/support/doc_commands.py:\n"
        + "\n".join(unclaimed)
    )


def test_no_rule_or_allowance_outlives_the_commands_it_was_written_for() -> None:
    found = doc_commands.commands()
    stale = [text for text in ALLOWED if all(command.text != text for command in found)]
    stale += [rule.pattern for rule in RUNS if all(how(command) is not rule for command in found)]
    assert not stale, f"no doc shows these any more: remove them from tests/support/doc_commands.py: {stale}"


def test_each_kind_of_source_is_read() -> None:
    """Fences, the NOTES template and the examples' comments each give their commands (the extractor is alive)."""
    found = {(command.source, command.text) for command in doc_commands.commands()}
    assert ("README.md", "make demo") in found
    assert (NOTES, "kubectl -n {} port-forward service/{} 8000:{}") in found
    assert (
        "examples/image-classification/shapes.py",
        "bin/tjctl run examples/image-classification/shapes-ddp.yaml",
    ) in found
    shapes = "examples/image-classification/shapes-ps.yaml"
    assert any(source == shapes and text.count(" -f ") == 3 for source, text in found), "a continued line"


def test_a_fence_joins_continuations_and_drops_comments_but_not_quoted_hashes(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "```console\n"
        "kubectl apply -f a.yaml \\\n  -f b.yaml   # both\n"
        "# a comment line\n"
        "kubectl get x -o jsonpath='{.data.ca\\.crt}#x' | base64 -d\n"
        "```\n```yaml\nkind: NotACommand\n```\n"
    )
    texts = [command.text for command in doc_commands.markdown_commands(doc)]
    assert texts == ["kubectl apply -f a.yaml -f b.yaml", "kubectl get x -o jsonpath='{.data.ca\\.crt}#x' | base64 -d"]


def test_the_wheel_the_docs_install_is_this_version() -> None:
    wheels = {m for c in doc_commands.commands() for m in re.findall(r"dist/trainingjob-([\w.]+)-py3", c.text)}
    assert wheels == {__version__}


def test_commands_named_in_prose_name_real_tjctl_commands_and_make_targets() -> None:
    """`tjctl local` (a command that never existed) or `make nodes` in a sentence fail here."""
    parser = build_parser()
    subcommands = set(parser._subparsers._group_actions[0].choices or ())  # type: ignore[union-attr]
    targets = set(re.findall(r"^([a-z-]+):", (REPO / "Makefile").read_text(), re.MULTILINE))
    wrong = []
    for source in doc_commands._files(doc_commands.MARKDOWN):
        for span in re.findall(r"`([^`\n]+)`", source.read_text()):
            words = span.split()
            if words[0] in ("tjctl", "bin/tjctl") and len(words) > 1 and not words[1].startswith("-"):
                wrong += [f"{source.name}: {span}"] if words[1] not in subcommands else []
            elif words[0] == "make" and len(words) > 1 and "=" not in words[1]:
                wrong += [f"{source.name}: {span}"] if words[1] not in targets else []
    assert not wrong, wrong


def test_a_rule_with_a_source_wins_only_there() -> None:
    tour = DocCommand("README.md", 1, 1, "kubectl apply -f examples/digits-ddp-checkpoints.yaml")
    elsewhere = DocCommand("charts/README.md", 1, 1, tour.text)
    assert isinstance(how(tour), Run) and isinstance(how(elsewhere), Run)
    assert (how(tour).tier, how(elsewhere).tier) == ("node", "integration")  # type: ignore[union-attr]
