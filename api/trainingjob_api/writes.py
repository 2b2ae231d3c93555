"""What a request that changes something (POST, PUT, PATCH, DELETE) must carry, so that another site cannot make a
browser send one: behind an authenticating proxy that adds the token from its cookie, a cross-site form would
otherwise create, suspend and delete jobs as the person. A form cannot set a header of its own nor a JSON or YAML
Content-Type, and a script of another origin cannot either without a CORS preflight, which this API never grants."""

from collections.abc import Mapping

from fastapi import Request

from trainingjob_api.problems import ApiError

UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
REQUESTED_WITH = "X-Requested-With"
# Sec-Fetch-Site as browsers send it: the request's origin is the page's own, or a person typed it.
OWN_SITE = frozenset({"same-origin", "none"})
JSON_TYPES = frozenset({"application/json"})
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})
ACCEPTED = "application/json or application/yaml"


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header, lower case, without its parameters; "" without one."""
    return (content_type or "").split(";")[0].strip().lower()


def is_structured(kind: str) -> bool:
    """A JSON or YAML media type, the bodies this API reads."""
    return kind in JSON_TYPES or kind in YAML_TYPES or kind.endswith("+json")


def _has_body(headers: Mapping[str, str]) -> bool:
    return headers.get("content-length", "0").strip() not in {"", "0"} or "transfer-encoding" in headers


def write_refusal(method: str, headers: Mapping[str, str]) -> ApiError | None:
    """Why this request may not change anything (403 cross-site, 415 a body of another type); None when it may,
    or when it changes nothing. `headers` is looked up by lower-case name."""
    if method.upper() not in UNSAFE:
        return None
    site = headers.get("sec-fetch-site", "").strip().lower()
    if site and site not in OWN_SITE:
        return ApiError(403, "CrossSiteRequest", f"a {site} request may not change anything here")
    if not headers.get(REQUESTED_WITH.lower(), "").strip():
        return ApiError(
            403, "CrossSiteRequest",
            f"a {method.upper()} needs an {REQUESTED_WITH} header (any value), which no web form can send",
        )  # fmt: skip
    if _has_body(headers) and not is_structured(media_type(headers.get("content-type"))):
        found = media_type(headers.get("content-type")) or "no Content-Type"
        return ApiError(415, "UnsupportedMediaType", f"send the body as {ACCEPTED}, not {found}")
    return None


def same_site_writes(request: Request) -> None:
    """The app-wide dependency: raise write_refusal's answer."""
    refusal = write_refusal(request.method, request.headers)
    if refusal is not None:
        raise refusal
