"""Real tiers on this machine, stood up and driven from Python: what the make targets (dev-cluster, demo-cluster),
the benchmarks and the tests all use. Test-only helpers (fakes, builders, corpora, the REST API's test world) live
in tests/support; nothing here imports from tests. Each module and why it is here:

- processes: servers in their own process groups, stopped by group id; free ports; polling with a deadline.
- pki: the certificate authority and the certificates the control plane and its users present.
- kwok: kwok's configuration and fake GPU nodes (the cluster tier's nodes).
- controlplane: the envtest and cluster tiers (etcd, kube-apiserver, controller-manager, scheduler, kwok).
- namespaces: namespaces with their default ServiceAccount, deleted and waited for; one named after a test.
- crds: our generated CRDs installed and established; a bare plane (no controller-manager) made ready for jobs.
- helm: the control plane's helm binary over our chart (lint, template, install, uninstall).
- operator: the operator as a process (OperatorProcess), as benches and the cluster tier run it.
- pods, harness: a kwok pod ended as a test or bench needs; a Harness that creates, waits for and ends jobs.
- silent_kubelet: a Node whose kubelet serves logs and then stays silent, and pods bound to it (log streams).
- node_config, node_host, node_images, node, node_cluster, node_jobs: the node tier (a real kubelet and
  containerd, our images, the chart installed, examples run as jobs), used by its tests, bench_node and the demo.
- examples: the shipped examples and the ConfigMaps made from their code (`python -m testbed.examples` rewrites
  them), read by the node tier, the demo and the tests.
- chromium: headless Chromium through Selenium, for the browser tier and the dashboard benchmark.
- trainer_procs: `python -m trainer` pods as local processes (one pod, a DDP gang, a parameter-server job), for
  the trainer tier and the trainer benchmarks.
- devcluster, demo_cluster: `make dev-cluster` and `make demo-cluster` (`python -m testbed.devcluster`, ...).
"""
