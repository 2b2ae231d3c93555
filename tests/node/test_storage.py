"""The node tier's default StorageClass: a claim as shipped (no storageClassName) gets a local volume made for it
on the node, and deleting the claim deletes the volume and its folder."""

import pytest
from kubernetes import client
from testbed.harness import Harness
from testbed.node_jobs import apply_claim, example
from testbed.node_storage import PROVISIONER, STORAGE_CLASS
from testbed.processes import poll_until

pytestmark = pytest.mark.node


def test_a_shipped_claim_gets_a_volume_that_goes_with_it(nh: Harness) -> None:
    folder = apply_claim(nh, "digits-ddp-checkpoints.yaml")
    name = example("digits-ddp-checkpoints.yaml")[0]["metadata"]["name"]
    claim = nh.core.read_namespaced_persistent_volume_claim(name, nh.ns)
    volume = nh.core.read_persistent_volume(claim.spec.volume_name)
    assert claim.spec.storage_class_name == STORAGE_CLASS  # the default, set at admission
    assert volume.metadata.annotations["pv.kubernetes.io/provisioned-by"] == PROVISIONER
    assert (volume.spec.claim_ref.uid, volume.spec.access_modes) == (claim.metadata.uid, ["ReadWriteMany"])
    assert folder.is_dir() and (folder.stat().st_uid, folder.stat().st_mode & 0o777) == (0, 0o755)

    nh.core.delete_namespaced_persistent_volume_claim(name, nh.ns)

    def gone() -> bool:
        try:
            nh.core.read_persistent_volume(volume.metadata.name)
        except client.ApiException as error:
            return bool(error.status == 404)
        return False

    poll_until(gone, timeout=60, what=f"volume {volume.metadata.name} deleted with its claim")
    assert not folder.exists()
