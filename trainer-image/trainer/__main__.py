"""The container entry point: `python -m trainer [script.py args...]`."""

import logging
import os
import sys

from trainer.launcher import main

if __name__ == "__main__":
    code = main(sys.argv[1:])
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # Everything is on disk by now; skipping interpreter teardown avoids torch.distributed's C++ threads
    # aborting the process ("terminate called without an active exception") after a clean finish.
    os._exit(code)
