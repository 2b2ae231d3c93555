"""The interactive API docs (Swagger UI) and the OpenAPI schema, served from the API itself, assets included: they
work in a cluster that cannot reach a CDN. Like every route but /healthz and /readyz they answer only callers with a
bearer token Kubernetes accepts (TokenReview): in a browser, behind a proxy that adds it."""

from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from swagger_ui_bundle import swagger_ui_path

from trainingjob_api.deps import AuthenticatedCaller
from trainingjob_api.problems import ApiError

OPENAPI = "/openapi.json"
ASSETS = "/docs-assets"
# The files /docs loads, and nothing else of the bundle.
ASSET_TYPES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "favicon-32x32.png": "image/png",
}
router = APIRouter(include_in_schema=False)


@router.get("/docs")
def swagger_ui(_: AuthenticatedCaller) -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=OPENAPI,
        title="TrainingJob API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
    )


@router.get(f"{ASSETS}/{{name}}")
def asset(name: str, _: AuthenticatedCaller) -> FileResponse:
    if name not in ASSET_TYPES:
        raise ApiError(404, "NotFound", f"{ASSETS}/{name} is not a file of the docs")
    return FileResponse(Path(swagger_ui_path) / name, media_type=ASSET_TYPES[name])


@router.get(OPENAPI)
def openapi(request: Request, _: AuthenticatedCaller) -> JSONResponse:
    schema: dict[str, Any] = request.app.openapi()
    return JSONResponse(schema)


def install(app: FastAPI) -> None:
    """/docs, the files it loads, and the schema (create_app turns FastAPI's own, unauthenticated, off)."""
    app.include_router(router)
