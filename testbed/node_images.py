"""Images on the node without a registry: our images come as archives from scripts/build-images.sh and are
imported into the node's containerd once per build key; the pod sandbox (pause) image is written here, one layer
holding the static pause program that scripts/build-node.sh builds."""

import hashlib
import io
import json
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin uses
LOCAL_PREFIX = "localhost/trainingjob/"  # every image of ours has a name here (its build key as the tag)


@dataclass(frozen=True)
class BuiltImage:
    """One line of scripts/build-images.sh: the image, its build key, its archive and the name manifests use."""

    name: str
    key: str
    archive: Path
    public_ref: str

    @property
    def local_ref(self) -> str:
        return f"{LOCAL_PREFIX}{self.name}:{self.key}"

    @classmethod
    def parse(cls, line: str) -> "BuiltImage":
        name, key, archive, public_ref = line.split()
        return cls(name, key, Path(archive), public_ref)


def build_images(script: Path, names: tuple[str, ...] = ()) -> dict[str, BuiltImage]:
    """Run scripts/build-images.sh (a no-op for images whose archive is current); its logs go to our stderr."""
    done = subprocess.run(["bash", str(script), *names], stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed with exit code {done.returncode} (its log is above)")
    images = [BuiltImage.parse(line) for line in done.stdout.splitlines() if line.strip()]
    return {image.name: image for image in images}


def pause_archive(pause_binary: Path, folder: Path) -> tuple[str, Path]:
    """A docker-archive with one layer holding `/pause`; returns (reference, archive), keyed by the binary."""
    binary = pause_binary.read_bytes()
    layer = _one_file_layer("pause", binary)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        }
    ).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    reference = f"{LOCAL_PREFIX}pause:{hashlib.sha256(binary).hexdigest()[:12]}"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [reference], "Layers": ["layer.tar"]}]).encode()
    archive = folder / "pause.tar"
    with tarfile.open(archive, "w") as tar:
        for name, data in (("layer.tar", layer), (config_name, config), ("manifest.json", manifest)):
            _add(tar, name, data, 0o644)
    return reference, archive


def _one_file_layer(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        _add(tar, name, data, 0o755)
    return buffer.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tar.addfile(info, io.BytesIO(data))


class Containerd:
    """`ctr` against the node's containerd socket, in the CRI plugin's namespace."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket

    def ctr(self, *args: str) -> str:
        argv = ["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")
        return done.stdout

    def references(self) -> set[str]:
        return set(self.targets())

    def ensure(self, archive: Path, reference: str, *also: str) -> bool:
        """Import `archive` unless `reference` is already there; tag it with each of `also`. True if imported."""
        imported = reference not in self.references()
        if imported:
            self.ctr("images", "import", str(archive))
        present = self.references()
        if reference not in present:
            raise RuntimeError(f"{archive} did not provide {reference}; containerd has {sorted(present)}")
        for alias in also:  # the public name may point at an older build: move it
            self.ctr("images", "tag", "--force", reference, alias)
        return imported

    def targets(self) -> dict[str, str]:
        """Every image reference and the manifest digest it names (the CRI plugin adds sha256:<id> names)."""
        rows = [line.split() for line in self.ctr("images", "list").splitlines()[1:]]
        return {row[0]: row[2] for row in rows if len(row) > 2}

    def prune(self, current: BuiltImage) -> list[str]:
        """Remove the earlier builds of `current`'s image and every other name of them (a trainer image costs
        about 12 GB imported and unpacked); containerd's garbage collector then frees content and snapshots."""
        prefix = current.local_ref.rsplit(":", 1)[0] + ":"
        targets = self.targets()
        old = {ref for ref in targets if ref.startswith(prefix) and ref != current.local_ref}
        live = {digest for ref, digest in targets.items() if ref.startswith(LOCAL_PREFIX) and ref not in old}
        stale = sorted(ref for ref, digest in targets.items() if digest not in live)
        if stale:
            self.ctr("images", "remove", "--sync", *stale)
        return stale

    def task_pid(self, container_id: str) -> int:
        """The host pid of a running container's first process (for kill -9 / SIGSTOP from the test driver)."""
        for line in self.ctr("tasks", "list").splitlines()[1:]:
            fields = line.split()
            if fields and fields[0] == container_id:
                return int(fields[1])
        raise LookupError(f"container {container_id} has no running task")
