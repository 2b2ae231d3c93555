"""The web dashboard: a small static front end (trainingjob_api/ui) served by the API itself, so it works where no
CDN can be reached. The files hold no data and need no token; the page calls the REST API with the caller's token.

Assets live under /ui/assets/<version>/, where the version is a digest of every file: they are cached for a year,
and the page (never cached) names the current version, so an upgrade is seen at once."""

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

UI_DIR = Path(__file__).resolve().parent.parent / "ui"
PAGE = "index.html"
ASSETS_MARKER = "%ASSETS%"
TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".html": "text/html"}
POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self'",
        "font-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    etag: str


@dataclass(frozen=True)
class Bundle:
    """Every file of the front end, read once: only these paths are ever served."""

    version: str
    page: bytes
    assets: dict[str, Asset]


def load(folder: Path = UI_DIR) -> Bundle:
    files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    if PAGE not in files:
        raise FileNotFoundError(f"the dashboard's {PAGE} is missing from {folder}")
    digest = hashlib.sha256()
    for name, body in files.items():
        digest.update(name.encode() + b"\0" + body + b"\0")
    version = digest.hexdigest()[:16]
    page = files.pop(PAGE).replace(ASSETS_MARKER.encode(), f"assets/{version}".encode())
    assets = {name: Asset(body, _media_type(name), f'"{version}"') for name, body in files.items()}
    return Bundle(version, page, assets)


def _media_type(name: str) -> str:
    suffix = Path(name).suffix
    return TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


router = APIRouter(include_in_schema=False)
BUNDLE = load()


@router.get("/")
def root() -> RedirectResponse:
    return RedirectResponse("ui/", status_code=307)


@router.get("/ui")
def ui_without_slash() -> RedirectResponse:
    return RedirectResponse("ui/", status_code=307)


@router.get("/ui/")
def page() -> Response:
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
    return Response(BUNDLE.page, media_type="text/html; charset=utf-8", headers=headers)


@router.get("/ui/assets/{version}/{path:path}")
def asset(version: str, path: str, request: Request) -> Response:
    found = BUNDLE.assets.get(path)
    if found is None or version != BUNDLE.version:
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        return Response(b"not found\n", status_code=404, media_type="text/plain", headers=headers)
    headers = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=31536000, immutable", "ETag": found.etag}
    if request.headers.get("if-none-match") == found.etag:
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)
