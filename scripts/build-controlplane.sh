#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, kwokctl and helm from the Go
# module proxy into a versioned cache outside the clone, and prints the folder that holds them.
# Binaries already present in $KUBEBUILDER_ASSETS are not built. Each binary is built once per cache key.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=controlplane.env
source "$here/controlplane.env"

key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}_r${RECIPE}"
TAG=controlplane
# shellcheck source=gobuild.sh
source "$here/gobuild.sh"
cache_dirs controlplane "$key"

build_etcd() {
  local dir="$work_dir/etcd"
  wrapper "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" &&
    go build -trimpath -o "$bin_dir/etcd" go.etcd.io/etcd/server/v3)
}

build_install() {  # build_install NAME PACKAGE@VERSION [LDFLAGS]
  local name=$1 pkg=$2 ldflags=${3:-}
  GOBIN="$work_dir/gobin" go install -trimpath -ldflags "-s -w $ldflags" "$pkg"
  install -m 0755 "$work_dir/gobin/$name" "$bin_dir/$name"
}

total=$SECONDS
log "cache: $bin_dir"
log "versions: kubernetes $KUBERNETES_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION, helm $HELM_VERSION ($(go version))"
already etcd || timed etcd build_etcd
for name in kube-apiserver kube-controller-manager kube-scheduler; do
  already "$name" || timed "$name" build_kube "$name"
done
already kwok || timed kwok build_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
already kwokctl || timed kwokctl build_install kwokctl "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
already helm || timed helm build_install helm "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
  "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
log "control plane ready in $((SECONDS - total)) s"
echo "$bin_dir"
