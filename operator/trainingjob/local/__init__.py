"""Local mode: the Cluster ports on this machine, each pod a local process, no Kubernetes at all."""
