"""What a real node changes on this machine, recorded before the node tier starts and undone after it stops.

The kubelet rewrites kernel sysctls, the bridge plugin turns on IP forwarding, kube-proxy and CNI add iptables
chains, the kubelet makes `/kubepods` cgroups and a few fixed host folders. Everything here is measured first and
put back as it was; a folder that existed before is left alone."""

import contextlib
import fcntl
import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SYSCTLS = (
    "vm/overcommit_memory",
    "kernel/panic",
    "kernel/panic_on_oops",
    "net/ipv4/ip_forward",
    "net/ipv4/conf/all/route_localnet",
    "net/bridge/bridge-nf-call-iptables",
)
# Folders a kubelet, containerd or a CNI plugin makes at fixed places, whatever their configuration says.
HOST_FOLDERS = (
    Path("/run/containerd"),
    Path("/var/lib/cni"),
    Path("/var/lib/kubelet"),
    Path("/var/log/containers"),
    Path("/var/log/pods"),
    Path("/etc/cni"),
    Path("/opt/cni"),
    Path("/opt/containerd"),
    Path("/run/mount"),
)
CGROUP_ROOT = Path("/sys/fs/cgroup")
OUR_CHAIN_PREFIXES = ("KUBE-", "CNI-")


class NodeTierBusyError(RuntimeError):
    """Another node tier holds this machine's lock."""


@contextlib.contextmanager
def machine_lock(path: Path, timeout: float) -> Iterator[None]:
    """One node tier per machine (bridge, kubelet ports, cgroups, iptables): an exclusive lock on `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise NodeTierBusyError(
                        f"another node tier holds {path} (only one runs per machine); waited {timeout:.0f} s"
                    ) from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True)
class HostState:
    """What the node tier will change, as it was before."""

    sysctls: dict[str, str]
    absent_folders: tuple[Path, ...]
    cgroups_before: frozenset[Path]

    @classmethod
    def record(cls) -> "HostState":
        values = {name: _read_sysctl(name) for name in SYSCTLS}
        return cls(
            sysctls={name: value for name, value in values.items() if value is not None},
            absent_folders=tuple(folder for folder in HOST_FOLDERS if not folder.exists()),
            cgroups_before=frozenset(_kubepods_cgroups()),
        )

    def restore(self) -> list[str]:
        """Put the machine back; returns what could not be undone (empty when all went well)."""
        problems: list[str] = []
        problems += remove_iptables_chains()
        problems += _remove_cgroups(set(_kubepods_cgroups()) - self.cgroups_before)
        for folder in self.absent_folders:
            problems += unmount_under(folder)
            subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)
        for name, value in self.sysctls.items():
            if _read_sysctl(name) != value:
                set_sysctl(name, value)
        return problems


def set_sysctl(name: str, value: str) -> None:
    (Path("/proc/sys") / name).write_text(value)


def _read_sysctl(name: str) -> str | None:
    path = Path("/proc/sys") / name
    return path.read_text().strip() if path.exists() else None


def create_bridge(name: str, address: str) -> None:
    """A Linux bridge with the node's address (`10.244.0.1/24`): the node IP cannot be loopback."""
    delete_bridge(name)
    _ip("link", "add", name, "type", "bridge")
    _ip("addr", "add", address, "dev", name)
    _ip("link", "set", name, "up")


def delete_bridge(name: str) -> None:
    if Path(f"/sys/class/net/{name}").exists():
        _ip("link", "delete", name)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def unmount_under(root: Path) -> list[str]:
    """Lazily unmount everything mounted at or below `root`, deepest first (pod volumes, netns, overlays)."""
    prefix = str(root.resolve())
    mounts = [
        line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines() if len(line.split()) > 4
    ]
    ours = sorted({m for m in mounts if m == prefix or m.startswith(prefix + "/")}, key=len, reverse=True)
    problems: list[str] = []
    for mount in ours:
        done = subprocess.run(["umount", "-l", mount], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            problems.append(f"umount {mount}: {done.stderr.strip()}")
    return problems


def _kubepods_cgroups() -> Iterator[Path]:
    if not CGROUP_ROOT.is_dir():
        return
    for hierarchy in CGROUP_ROOT.iterdir():
        folder = hierarchy / "kubepods"
        if folder.is_dir():
            yield folder


def _remove_cgroups(folders: set[Path]) -> list[str]:
    """rmdir each cgroup tree bottom-up (a cgroup folder is removed with rmdir, never rm -r)."""
    problems: list[str] = []
    for top in folders:
        for dirpath, _, _ in sorted(os.walk(top), key=lambda entry: len(entry[0]), reverse=True):
            try:
                os.rmdir(dirpath)
            except OSError as error:
                problems.append(f"cgroup {dirpath}: {error}")
    return problems


def remove_iptables_chains() -> list[str]:
    """Drop every KUBE-*/CNI-* chain, and the rules that jump to them, from each table of iptables and
    ip6tables (kube-proxy --cleanup and CNI DEL normally leave none: this is the safety net)."""
    problems: list[str] = []
    for tool in ("iptables", "ip6tables"):
        saved = subprocess.run([f"{tool}-save"], capture_output=True, text=True, check=False)
        if saved.returncode != 0:
            continue
        for table, rules, chains in _our_rules(saved.stdout):
            for rule in rules:
                _iptables(tool, table, "-D", *shlex.split(rule)[1:], problems=problems)
            for chain in chains:
                _iptables(tool, table, "-F", chain, problems=problems)
            for chain in chains:
                _iptables(tool, table, "-X", chain, problems=problems)
    return problems


def _our_rules(saved: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """(table, rules in built-in chains that jump to ours, our chains) for each table in iptables-save output."""
    table = ""
    chains: list[str] = []
    rules: list[str] = []
    for line in saved.splitlines():
        if line.startswith("*"):
            table, chains, rules = line[1:], [], []
        elif line.startswith(":") and line[1:].startswith(OUR_CHAIN_PREFIXES):
            chains.append(line[1:].split()[0])
        elif line.startswith("-A ") and not line.split()[1].startswith(OUR_CHAIN_PREFIXES):
            if any(f"-j {prefix}" in line for prefix in OUR_CHAIN_PREFIXES):
                rules.append(line)
        elif line == "COMMIT" and (chains or rules):
            yield table, rules, chains


def _iptables(tool: str, table: str, *args: str, problems: list[str]) -> None:
    done = subprocess.run([tool, "-w", "5", "-t", table, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        problems.append(f"{tool} -t {table} {' '.join(args)}: {done.stderr.strip()}")
