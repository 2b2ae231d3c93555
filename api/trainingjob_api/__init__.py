"""The TrainingJob REST API: FastAPI over the Kubernetes API, secured by TokenReview and SubjectAccessReview."""
