"""The examples' ConfigMaps carry exactly the code files beside them."""

import pytest
import yaml
from testbed.examples import CODE_CONFIGMAPS, EXAMPLES, render_configmap

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("manifest", sorted(CODE_CONFIGMAPS), ids=sorted(CODE_CONFIGMAPS))
def test_a_code_configmap_matches_its_files(manifest: str) -> None:
    shipped = (EXAMPLES / manifest).read_text()
    assert shipped == render_configmap(manifest), f"run `python -m testbed.examples` to rewrite {manifest}"
    data = yaml.safe_load(shipped)["data"]
    for file in CODE_CONFIGMAPS[manifest][1]:
        assert data[file.rpartition("/")[2]] == (EXAMPLES / file).read_text()
