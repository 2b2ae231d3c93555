"""python -m trainingjob_api: serve the REST API with uvicorn, configured by TJ_API_* variables."""

import logging

import uvicorn

from trainingjob_api.app import create_app
from trainingjob_api.settings import ApiSettings


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = ApiSettings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, proxy_headers=False)


if __name__ == "__main__":
    main()
