"""TrainingJob operator: the shared model, the pure planner and the kopf operator."""

__version__ = "0.2.0"
