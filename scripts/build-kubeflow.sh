#!/usr/bin/env bash
# Builds Kubeflow's training-operator (the v1 manager that runs the PyTorchJob controller) from the Go module proxy
# into a versioned cache outside the clone, copies the PyTorchJob CRD from the same module's source next to it,
# and prints the folder that holds both. Built once per cache key. Only the benchmark uses it (bench/kubeflow.py).
set -euo pipefail

# The newest v1.9 patch on the module proxy. Its go.mod has no replace or exclude directives, so
# `go install module/cmd@version` resolves exactly as the project's own go.mod and go.sum do.
KUBEFLOW_VERSION=v1.9.4
# Bump when the build recipe itself changes in a way that changes the binary.
KUBEFLOW_RECIPE=1

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=controlplane.env
source "$here/controlplane.env"  # gobuild.sh probes the checksum database with KWOK_VERSION

module=github.com/kubeflow/training-operator
key="kubeflow-${KUBEFLOW_VERSION}_r${KUBEFLOW_RECIPE}"
TAG=kubeflow
# shellcheck source=gobuild.sh
source "$here/gobuild.sh"
cache_dirs kubeflow "$key"

# Built as upstream's image builds it (CGO off, no stripping); -trimpath only keeps the cache paths out of it.
build_operator() {
  GOBIN="$work_dir/gobin" go install -trimpath "$module/cmd/training-operator.v1@$KUBEFLOW_VERSION"
  install -m 0755 "$work_dir/gobin/training-operator.v1" "$bin_dir/training-operator"
}

copy_crd() {  # the CRD the binary was built with: the module's own manifests, read from the module cache
  local src
  src=$(go mod download -json "$module@$KUBEFLOW_VERSION" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","download failed")))')
  install -m 0644 "$src/manifests/base/crds/kubeflow.org_pytorchjobs.yaml" "$bin_dir/kubeflow.org_pytorchjobs.yaml"
}

total=$SECONDS
log "cache: $bin_dir"
log "version: $module $KUBEFLOW_VERSION ($(go version))"
[ -x "$bin_dir/training-operator" ] || timed training-operator build_operator
[ -f "$bin_dir/kubeflow.org_pytorchjobs.yaml" ] || timed pytorchjob-crd copy_crd
"$bin_dir/training-operator" --help >/dev/null 2>&1 || die "$bin_dir/training-operator does not run"
log "training-operator ready in $((SECONDS - total)) s"
echo "$bin_dir"
