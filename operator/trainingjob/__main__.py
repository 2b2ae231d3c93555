"""`python -m trainingjob`: run the operator (kopf) in the foreground against the current kubeconfig."""

import asyncio
import faulthandler
import json
import logging
import os
import signal

import kopf

import trainingjob.runtime.operator  # noqa: F401  (registers the startup and cleanup hooks with kopf)
from trainingjob.runtime import gc_tuning

# Fields reconcile puts on its decision lines; the JSON format carries them as keys of their own.
DECISION_FIELDS = ("job", "attempt", "decision")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, and the job, attempt and decision if known."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **{key: getattr(record, key) for key in DECISION_FIELDS if hasattr(record, key)},
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(level: str, style: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter() if style == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=level, handlers=[handler], force=True)


def main() -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1`: every thread's stack, to stderr
    gc_tuning.tune()
    configure_logging(os.environ.get("TJ_OPERATOR_LOG_LEVEL", "INFO"), os.environ.get("TJ_OPERATOR_LOG_FORMAT", "text"))
    namespace = os.environ.get("TJ_OPERATOR_NAMESPACE", "")
    asyncio.run(
        kopf.operator(
            standalone=True,
            clusterwide=not namespace,
            namespaces=[namespace] if namespace else [],
        )
    )


if __name__ == "__main__":
    main()
