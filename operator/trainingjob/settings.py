"""Operator settings, from TJ_OPERATOR_* environment variables; built once at startup and passed down."""

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class OperatorSettings(BaseSettings):
    """How the operator runs; every field can be set as TJ_OPERATOR_<FIELD>."""

    model_config = SettingsConfigDict(env_prefix="TJ_OPERATOR_")

    namespace: str = ""
    """Watch only this namespace; every namespace when empty."""
    metrics_port: int = Field(default=8080, ge=0, le=65535)
    """Port of the Prometheus /metrics endpoint; 0 turns it off."""
    backoff_base_seconds: float = Field(default=10.0, gt=0)
    """Delay before the second attempt; it doubles with every restart."""
    backoff_max_seconds: float = Field(default=300.0, gt=0)
    """The longest delay between attempts."""
    resync_seconds: float = Field(default=60.0, gt=0)
    """Reconcile every job at least this often, even when nothing changed."""
    workers: int = Field(default=8, ge=1, le=256)
    """Jobs reconciled at the same time."""
    read_progress: bool = False
    """Read rank 0's progress endpoint (pod IP, port 29400) for status.progress and progressDeadlineSeconds."""
    log_tail_lines: int = Field(default=20, ge=0, le=1000)
    """Lines of a failed pod's log kept in status.lastFailure."""
