"""TrainingJob operator: the shared model, the pure planner and the kopf operator."""
