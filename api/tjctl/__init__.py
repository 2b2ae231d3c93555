"""tjctl: run a TrainingJob on this machine, or submit and manage TrainingJobs on a cluster."""
