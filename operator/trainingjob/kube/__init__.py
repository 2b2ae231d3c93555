"""The Kubernetes adapter: the Cluster ports reconcile needs, and their implementation on the apiserver."""
