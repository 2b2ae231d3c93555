"""`make dev-cluster` / `make dev-cluster-down`: the cluster tier for people, in the background.

`up` starts a detached keeper process that runs the control plane until `down` sends it SIGTERM. It writes
DIR/kubeconfig (the admin), links the binaries into DIR/bin, and records every process group in DIR/pids so
`down` can stop them even if the keeper itself is gone. `up` refuses while a keeper runs (it would wipe a cluster
someone uses); a stale one, whose keeper is gone, is cleaned up and replaced.
"""

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from testbed.controlplane import GPU_NODES, Binaries, ControlPlane
from testbed.processes import poll_until


def _keep(folder: Path) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    plane = ControlPlane(folder / "cluster", Binaries.from_environment(), cluster=True)
    try:
        plane.start()
        (folder / "pids").write_text("\n".join(str(s.process.pid) for s in plane.servers) + "\n")
        shutil.copy(plane.kubeconfig, folder / "kubeconfig")
        plane.link_binaries(folder / "bin")
        (folder / "ready").touch()
        stop.wait()
    finally:
        plane.stop()
        (folder / "ready").unlink(missing_ok=True)


KEEPER_ARGS = ("-m", "testbed.devcluster", "keep")
RESTART = "make dev-cluster-down && make dev-cluster"


def running_keeper(folder: Path) -> int | None:
    """The pid in DIR/keeper.pid if that process is alive and is a dev-cluster keeper; None when there is no
    cluster or only a stale one (its keeper gone, or the pid reused by another program)."""
    try:
        pid = int((folder / "keeper.pid").read_text())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except (OSError, ValueError):
        return None
    is_keeper = any(argv[i : i + len(KEEPER_ARGS)] == list(KEEPER_ARGS) for i in range(len(argv)))
    return pid if is_keeper else None


def up(folder: Path) -> None:
    running = running_keeper(folder)
    if running is not None:
        state = "running" if (folder / "ready").exists() else "starting"
        sys.exit(
            f"a dev cluster is already {state} in {folder} (keeper pid {running}, {folder / 'kubeconfig'}); "
            f"left as it is. To restart it: {RESTART}"
        )
    down(folder, quiet=True)  # a stale one: whatever of it is left
    (folder / "ready").unlink(missing_ok=True)
    shutil.rmtree(folder / "cluster", ignore_errors=True)
    (folder / "cluster").mkdir(parents=True)
    log = (folder / "keeper.log").open("wb")
    keeper = subprocess.Popen(
        [sys.executable, *KEEPER_ARGS, "--dir", str(folder)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    (folder / "keeper.pid").write_text(f"{keeper.pid}\n")

    def started() -> bool:
        if keeper.poll() is not None:
            raise RuntimeError(f"the dev cluster failed to start; see {folder / 'keeper.log'}")
        return (folder / "ready").exists()

    poll_until(started, timeout=120, what="the dev cluster")
    print(f"dev cluster up: {len(GPU_NODES)} GPU nodes")
    print(f"  kubectl --kubeconfig {folder / 'kubeconfig'} get nodes")
    print(f"  export PATH={folder.resolve() / 'bin'}:$PATH  # the binaries the tests use")
    print("  make dev-cluster-down  # stops it")


def _kill_group(pid: int, sig: int) -> bool:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    return True


def stop_keeper(folder: Path, timeout: float) -> None:
    """SIGTERM the keeper recorded in DIR/keeper.pid and wait until it has put things away."""
    keeper_pid = folder / "keeper.pid"
    if keeper_pid.exists():
        pid = int(keeper_pid.read_text())
        if _kill_group(pid, signal.SIGTERM):
            poll_until(lambda: not _kill_group(pid, 0), timeout=timeout, what="the keeper to stop")
        keeper_pid.unlink()


def down(folder: Path, quiet: bool = False) -> None:
    with contextlib.suppress(TimeoutError):
        stop_keeper(folder, timeout=30)
    pids = folder / "pids"
    if pids.exists():
        for line in pids.read_text().split():
            _kill_group(int(line), signal.SIGKILL)
        pids.unlink()
    if not quiet:
        print("dev cluster down")


def command_line(description: str, default_dir: str, commands: dict[str, Callable[[Path], None]]) -> None:
    """`python -m ... up|down|keep [--dir DIR]`: run one of `commands` on DIR (made if missing)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("command", choices=sorted(commands))
    parser.add_argument("--dir", type=Path, default=Path(default_dir))
    args = parser.parse_args()
    folder = args.dir.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    commands[args.command](folder)


if __name__ == "__main__":
    command_line(__doc__ or "", ".dev", {"up": up, "down": down, "keep": _keep})
