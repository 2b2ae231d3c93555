"""The TrainingJob trainer: `python -m trainer` runs DDP or parameter-server training from the environment."""
