"""Test support: a real Kubernetes control plane (etcd, kube-apiserver, controllers, kwok) and helpers."""
