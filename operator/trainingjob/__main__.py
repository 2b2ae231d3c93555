"""`python -m trainingjob`: run the operator (kopf) in the foreground against the current kubeconfig."""

import asyncio
import logging
import os

import kopf

import trainingjob.handlers  # noqa: F401  (registers the kopf handlers)


def main() -> None:
    logging.basicConfig(
        level=os.environ.get("TJ_OPERATOR_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
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
