"""The trainer never unpickles what a peer sends: no call in its package to torch's object collectives, which
unpickle what other ranks send (whoever reaches a job's rendezvous port could run code in every rank). Ranks share
bytes read back as data instead (trainer/collectives.py; tests/trainer/test_collectives.py)."""

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.fast

TRAINER = Path(__file__).resolve().parents[2] / "trainer-image" / "trainer"
OBJECT_COLLECTIVES = {
    "broadcast_object_list",
    "all_gather_object",
    "gather_object",
    "scatter_object_list",
    "send_object_list",
    "recv_object_list",
}


def object_collectives(source: str) -> list[str]:
    """The object collectives a module's source calls or names."""
    tree = ast.parse(source)
    names = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    names += [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    names += [alias.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for alias in n.names]
    return sorted(set(names) & OBJECT_COLLECTIVES)


@pytest.mark.parametrize(
    ("source", "found"),
    [
        pytest.param("dist.all_gather_object(parts, part)", ["all_gather_object"], id="attribute"),
        pytest.param("from torch.distributed import broadcast_object_list", ["broadcast_object_list"], id="import"),
        pytest.param("dist.all_gather(parts, tensor)", [], id="tensors"),
    ],
)
def test_the_check_finds_object_collectives(source: str, found: list[str]) -> None:
    assert object_collectives(source) == found


def test_the_trainer_calls_no_object_collective() -> None:
    found = {path.name: object_collectives(path.read_text()) for path in sorted(TRAINER.rglob("*.py"))}
    assert {name: calls for name, calls in found.items() if calls} == {}
