"""The node tier's dynamic volume provisioner: the default StorageClass's (testbed/node_storage.py deploys
both; scripts/build-images.sh builds this file into an image).

Why our own, in one file: Kubernetes has no provisioner for a bare node, and Rancher's local-path-provisioner
would bring a Go build, a helper-pod image and a configuration format of its own to keep working. This needs
Python's standard library only. A claim that the PV controller hands to $PROVISIONER gets a folder under
$VOLUMES_DIR (the host's path, mounted at the same path), offered as a local PersistentVolume bound to that claim
(root-owned 0755, as a fresh disk: pods write through their fsGroup). When the claim is gone, so are the volume and
its folder. One node only: the volume's node affinity is $NODE_NAME."""

import json
import os
import shutil
import signal
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
WANTED_BY = "volume.kubernetes.io/storage-provisioner"  # the PV controller's hand-over to an external provisioner
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
CLAIMS = "/api/v1/persistentvolumeclaims"
VOLUMES = "/api/v1/persistentvolumes"
Object = dict[str, Any]


class WatchExpiredError(Exception):
    """The watch ended with an ERROR event (410 Gone and the like): list again."""


class Provisioner:
    def __init__(self, name: str, node: str, folder: Path, server: str) -> None:
        self.name, self.node, self.folder, self.server = name, node, folder, server
        self.tls = ssl.create_default_context(cafile=str(ACCOUNT / "ca.crt"))

    def open(self, method: str, path: str, body: Object | None = None, timeout: float = 30) -> Any:
        headers = {"Authorization": f"Bearer {(ACCOUNT / 'token').read_text().strip()}"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.server + path, data, headers, method=method)
        return urllib.request.urlopen(request, context=self.tls, timeout=timeout)

    def call(self, method: str, path: str, body: Object | None = None, accept: tuple[int, ...] = ()) -> Object:
        """The answer's JSON; {} for an HTTP error in `accept` (409 on create, 404 on delete)."""
        try:
            with self.open(method, path, body) as answer:
                result: Object = json.load(answer)
                return result
        except urllib.error.HTTPError as error:
            if error.code in accept:
                return {}
            raise

    def provision(self, claim: Object) -> None:
        meta, spec = claim["metadata"], claim["spec"]
        wanted = meta.get("annotations", {}).get(WANTED_BY) == self.name
        if not wanted or spec.get("volumeName") or "deletionTimestamp" in meta:
            return
        if spec.get("volumeMode") == "Block":
            say(f"{meta['namespace']}/{meta['name']}: volumeMode Block is not supported (folders only)")
            return
        name = f"pvc-{meta['uid']}"
        folder = self.folder / name
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)
        hostname = {"key": "kubernetes.io/hostname", "operator": "In", "values": [self.node]}
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: self.name}},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec["accessModes"],
                "volumeMode": "Filesystem",
                "storageClassName": spec["storageClassName"],
                "persistentVolumeReclaimPolicy": "Delete",
                "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", **_key(meta)},
                "local": {"path": str(folder)},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [hostname]}]}},
            },
        }
        if self.call("POST", VOLUMES, volume, accept=(409,)):
            say(f"{meta['namespace']}/{meta['name']}: provisioned {name} at {folder}")

    def release(self, name: str) -> None:
        """Delete volume `name` and its folder if it is ours (its claim is gone: no pod uses it any more)."""
        volume = self.call("GET", f"{VOLUMES}/{name}", accept=(404,))
        if volume.get("metadata", {}).get("annotations", {}).get(PROVISIONED_BY) != self.name:
            return
        shutil.rmtree(self.folder / name, ignore_errors=True)
        self.call("DELETE", f"{VOLUMES}/{name}", accept=(404,))
        say(f"deleted {name} and its folder")

    def relist(self) -> str:
        """Provision every waiting claim and release every volume of ours left without one; the list's version."""
        for volume in self.call("GET", VOLUMES)["items"]:
            if volume.get("status", {}).get("phase") == "Released":
                self.release(volume["metadata"]["name"])
        claims = self.call("GET", CLAIMS)
        for claim in claims["items"]:
            self.provision(claim)
        return str(claims["metadata"]["resourceVersion"])

    def follow(self, version: str) -> None:
        """Watch claims from `version` until the apiserver ends the watch with an error."""
        while True:
            path = f"{CLAIMS}?watch=1&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion={version}"
            with self.open("GET", path, timeout=330) as stream:
                for line in stream:
                    event = json.loads(line)
                    claim = event["object"]
                    if event["type"] == "ERROR":
                        raise WatchExpiredError(claim.get("message", ""))
                    version = claim["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self.provision(claim)
                    elif event["type"] == "DELETED":
                        self.release(f"pvc-{claim['metadata']['uid']}")

    def run(self) -> None:
        say(f"{self.name}: volumes in {self.folder} on node {self.node}")
        while True:
            try:
                self.follow(self.relist())
            except WatchExpiredError as error:
                say(f"the watch expired ({error}): listing again")
            except (OSError, ValueError) as error:  # the apiserver unreachable or restarting: list again soon
                say(f"{error!r}: listing again in 1 s")
                time.sleep(1)


def _key(meta: Object) -> Object:
    return {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}


def say(line: str) -> None:
    print(f"[provisioner] {line}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # PID 1 in its container: no default action
    server = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
    Provisioner(os.environ["PROVISIONER"], os.environ["NODE_NAME"], Path(os.environ["VOLUMES_DIR"]), server).run()
