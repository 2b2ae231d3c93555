"""The dashboard's static files as the API serves them: a strict Content-Security-Policy, versioned immutable
assets, nothing fetched from elsewhere, no path outside the bundle, and every file shipped in the API image."""

import re
import subprocess
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from trainingjob_api.routers import ui

pytestmark = pytest.mark.fast

ASSET = re.compile(r'(?:src|href)="(assets/[0-9a-f]{16}/[^"]+)"')


@pytest.fixture(scope="module")
def web() -> TestClient:
    app = FastAPI()
    app.include_router(ui.router)
    return TestClient(app, follow_redirects=False)


def test_the_page_has_a_strict_policy_and_is_never_cached(web: TestClient) -> None:
    page = web.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "connect-src 'self'" in policy
    assert "unsafe" not in policy and "frame-ancestors 'none'" in policy
    assert page.headers["cache-control"] == "no-cache" and page.headers["x-content-type-options"] == "nosniff"
    assert ui.ASSETS_MARKER not in page.text
    assert "<script>" not in page.text and " style=" not in page.text and not re.search(r"\son[a-z]+=", page.text)


def test_assets_are_versioned_immutable_and_typed(web: TestClient) -> None:
    linked = ASSET.findall(web.get("/ui/").text)
    assert {Path(link).suffix for link in linked} == {".svg", ".css", ".js"}
    for link in linked:
        found = web.get(f"/ui/{link}")
        assert found.status_code == 200, link
        assert found.headers["cache-control"] == "public, max-age=31536000, immutable"
        expected = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}[Path(link).suffix]
        assert found.headers["content-type"].startswith(expected)
        again = web.get(f"/ui/{link}", headers={"If-None-Match": found.headers["etag"]})
        assert again.status_code == 304 and again.content == b""


def test_modules_import_only_files_of_the_bundle_and_the_page_preloads_each(web: TestClient) -> None:
    linked = {link.split("/", 2)[2] for link in ASSET.findall(web.get("/ui/").text)}
    assert {name for name in ui.BUNDLE.assets if name.endswith(".js")} == {n for n in linked if n.endswith(".js")}
    for name, asset in ui.BUNDLE.assets.items():
        if name.endswith(".js"):
            for imported in re.findall(r'from "(\./[^"]+)"', asset.body.decode()):
                target = (Path(name).parent / imported).as_posix()
                assert target in ui.BUNDLE.assets, f"{name} imports {imported}, which is not in the bundle"


@pytest.mark.parametrize(
    "path",
    [
        "/ui/assets/0000000000000000/style.css",  # an old version
        f"/ui/assets/{ui.BUNDLE.version}/nothing.js",
        f"/ui/assets/{ui.BUNDLE.version}/%2e%2e/routers/ui.py",
        f"/ui/assets/{ui.BUNDLE.version}/..%2f..%2fapp.py",
        f"/ui/assets/{ui.BUNDLE.version}/index.html",  # the page has its own address
    ],
)
def test_nothing_outside_the_bundle_is_served(web: TestClient, path: str) -> None:
    assert web.get(path).status_code == 404


def test_the_root_and_the_bare_path_lead_to_the_dashboard(web: TestClient) -> None:
    for path in ("/", "/ui"):
        answer = web.get(path)
        assert answer.status_code == 307 and answer.headers["location"] == "ui/"


def test_nothing_is_loaded_from_elsewhere_and_no_markup_is_built_from_strings() -> None:
    for path in sorted(ui.UI_DIR.rglob("*")):
        if path.is_file():
            text = path.read_text()
            links = set(re.findall(r"https?://[^\s\"'`)]+", text)) - {"http://www.w3.org/2000/svg"}
            assert not links, f"{path.name} refers to {links}"
            unsafe = r"\.(inner|outer)HTML\b|insertAdjacentHTML\(|document\.write\(|\beval\(|new Function\("
            assert not re.search(unsafe, text), path.name


def test_every_file_of_the_bundle_is_shipped() -> None:
    """The API image copies what git does not ignore: an ignored dashboard file would be missing there."""
    files = [str(p) for p in ui.UI_DIR.rglob("*") if p.is_file()]
    ignored = subprocess.run(
        ["git", "check-ignore", *files], check=False, capture_output=True, text=True, cwd=ui.UI_DIR
    )
    assert ignored.returncode == 1 and ignored.stdout == "", ignored.stdout  # 1: none of them is ignored


def test_a_bundle_without_its_page_is_an_error_and_the_version_follows_the_files(tmp_path: Path) -> None:
    (tmp_path / "app.js").write_text("export {};\n")
    with pytest.raises(FileNotFoundError, match=r"index\.html"):
        ui.load(tmp_path)
    (tmp_path / "index.html").write_text('<script type="module" src="%ASSETS%/app.js"></script>')
    first = ui.load(tmp_path)
    assert first.page.decode() == f'<script type="module" src="assets/{first.version}/app.js"></script>'
    (tmp_path / "app.js").write_text("export const changed = 1;\n")
    assert ui.load(tmp_path).version != first.version
