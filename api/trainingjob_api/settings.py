"""REST API settings, from TJ_API_* environment variables; built once at startup and passed down."""

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")


class ApiSettings(BaseSettings):
    """How the REST API runs; every field can be set as TJ_API_<FIELD>."""

    model_config = SettingsConfigDict(env_prefix="TJ_API_")

    kubeconfig: Path | None = None
    """The kubeconfig of the API's own Kubernetes identity; the in-cluster ServiceAccount when unset."""
    tls_cert_file: Path | None = None
    """PEM certificate (chain) to serve HTTPS with; with tls_key_file."""
    tls_key_file: Path | None = None
    """PEM private key of tls_cert_file."""
    plain_http: bool = False
    """Serve plain HTTP on a non-loopback address: only behind a proxy that terminates TLS. Callers send bearer
    tokens, so without TLS anyone on the path reads them."""
    namespaces: list[str] = Field(default_factory=list)
    """Serve only these namespaces (a JSON list, e.g. ["team-a","team-b"]); every namespace when empty. The API's
    own rights can then be Roles in these namespaces only (chart: api.namespaces)."""
    excluded_namespaces: list[str] = Field(default_factory=lambda: list(SYSTEM_NAMESPACES))
    """With namespaces empty (every namespace): these are not served (404), the cluster's own by default (a JSON
    list; [] serves every namespace). The API creates jobs with its own rights, so no caller reaches kube-system
    through it, whatever RBAC grants them there (chart: api.excludedNamespaces)."""
    host: str = "127.0.0.1"
    """Address to listen on (python -m trainingjob_api)."""
    port: int = Field(default=8000, ge=1, le=65535)
    """Port to listen on (python -m trainingjob_api)."""
    token_audience: str = "trainingjob-api"
    """The audience callers' tokens must be minted for (`kubectl create token NAME --audience trainingjob-api`):
    such a token is refused by the Kubernetes API itself, so the API (or anyone on the way) cannot replay it
    there. Empty accepts tokens for the Kubernetes API, which can be replayed."""
    auth_cache_seconds: float = Field(default=10.0, ge=0)
    """How long a TokenReview or SubjectAccessReview answer is reused; 0 asks Kubernetes every time."""
    auth_cache_size: int = Field(default=10_000, ge=1)
    """The most answers kept; the oldest are dropped first."""
    watch_timeout_seconds: int = Field(default=300, ge=1)
    """The cache's WATCH is renewed (from its last resourceVersion) after this long."""
    list_page_size: int = Field(default=20, ge=1)
    """Items per page of the cache's LIST. Each page is parsed whole, then kept as bytes: small pages bound what
    one LIST holds at once, and what the memory it frees leaves scattered (bench/bench_sizes.py: 300 jobs at the
    item budget grew the API by 277 MiB in pages of 500, by 58 MiB in pages of 10)."""
    max_page_size: int = Field(default=1000, ge=1)
    """The largest `limit` a caller may ask for; lists are not paginated when no limit is given."""
    sse_keepalive_seconds: float = Field(default=15.0, gt=0)
    """A comment line is sent on idle watch streams this often, so dead clients are noticed."""
    kubernetes_timeout_seconds: float = Field(default=30.0, gt=0)
    """Timeout of each request the API makes to Kubernetes (except streams)."""
    max_log_streams_per_caller: int = Field(default=20, ge=1)
    """The most streams (followed logs and watches) one caller may hold open at once (429 beyond)."""
    max_log_streams: int = Field(default=500, ge=1)
    """The most streams (followed logs and watches) all callers together may hold open at once (429 beyond)."""
    readiness_timeout_seconds: float = Field(default=2.0, gt=0)
    """How long /readyz waits for the Kubernetes API server's own /readyz before calling it unreachable."""
    stream_recheck_seconds: float = Field(default=60.0, gt=0)
    """Open streams (followed logs, watches) review their caller's token and access again this often, and end
    (a watch with an `ended` event saying why) once either is refused. A review is asked of Kubernetes afresh when
    its cached answer (auth_cache_seconds) has expired."""
    rate_per_second: float = Field(default=20.0, gt=0)
    """Requests each authenticated caller (by username) may send a second, on average (429 with Retry-After beyond)."""
    rate_burst: int = Field(default=100, ge=1)
    """Requests each caller may send at once, above rate_per_second."""
    max_access_checks: int = Field(default=100, ge=1)
    """The most namespaces a list across namespaces checks one by one (a SubjectAccessReview each) for a caller who
    may not list every namespace; with more, 422: the caller asks for one namespace."""
