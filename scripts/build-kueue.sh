#!/usr/bin/env bash
# Builds Kueue's manager from the Go module proxy into a versioned cache outside the clone, copies Kueue's CRDs
# from the same module's source next to it, and prints the folder that holds both. Built once per cache key.
# The cluster tier runs it against the envtest control plane (tests/support/kueue.py).
set -euo pipefail

# Kueue's go.mod has no replace or exclude directives, so `go install module/cmd@version` resolves exactly as the
# project's own go.mod and go.sum do.
KUEUE_VERSION=v0.17.0
# Bump when the build recipe itself changes in a way that changes the binary.
KUEUE_RECIPE=1

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=controlplane.env
source "$here/controlplane.env"  # gobuild.sh probes the checksum database with KWOK_VERSION

module=sigs.k8s.io/kueue
key="kueue-${KUEUE_VERSION}_r${KUEUE_RECIPE}"
TAG=kueue
# shellcheck source=gobuild.sh
source "$here/gobuild.sh"
cache_dirs kueue "$key"

# Built as upstream's image builds it (CGO off); -trimpath keeps the cache paths out of it, -s -w the debug tables.
build_manager() {
  GOBIN="$work_dir/gobin" go install -trimpath -ldflags "-s -w -X $module/pkg/version.GitVersion=$KUEUE_VERSION" \
    "$module/cmd/kueue@$KUEUE_VERSION"
  install -m 0755 "$work_dir/gobin/kueue" "$bin_dir/kueue"
}

copy_crds() {  # the CRDs the binary was built with: the module's own manifests, read from the module cache
  local src
  src=$(go mod download -json "$module@$KUEUE_VERSION" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","download failed")))')
  mkdir -p "$bin_dir/crds.tmp"
  install -m 0644 "$src"/config/components/crd/bases/*.yaml "$bin_dir/crds.tmp/"
  rm -rf "$bin_dir/crds" && mv "$bin_dir/crds.tmp" "$bin_dir/crds"
}

total=$SECONDS
log "cache: $bin_dir"
log "version: $module $KUEUE_VERSION ($(go version))"
[ -x "$bin_dir/kueue" ] || timed kueue build_manager
[ -f "$bin_dir/crds/kueue.x-k8s.io_workloads.yaml" ] || timed kueue-crds copy_crds
"$bin_dir/kueue" --help >/dev/null 2>&1 || die "$bin_dir/kueue does not run"
log "kueue ready in $((SECONDS - total)) s"
echo "$bin_dir"
