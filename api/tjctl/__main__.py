"""`tjctl` (`python -m tjctl`): run a TrainingJob locally, or submit and manage TrainingJobs on a cluster."""

import sys

from tjctl.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
