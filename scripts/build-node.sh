#!/usr/bin/env bash
# Builds the node tier's Go binaries from the Go module proxy: kubelet and kube-proxy (the pinned Kubernetes),
# CoreDNS (only the plugins a cluster DNS needs) and a static pause program for the pod sandbox image.
# Prints the folder that holds them. Each binary is built once per cache key.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=controlplane.env
source "$here/controlplane.env"

key="node-k8s-${KUBERNETES_VERSION}_coredns-${COREDNS_VERSION}_r${NODE_RECIPE}"
TAG=node
# shellcheck source=gobuild.sh
source "$here/gobuild.sh"
cache_dirs node "$key"

COREDNS_PLUGINS=(bind cache errors forward health hosts kubernetes loadbalance log loop ready reload)

build_coredns() {  # a main that links coremain and only the plugins a cluster DNS uses
  local dir="$work_dir/coredns"
  wrapper "$dir" github.com/coredns/coredns "$COREDNS_VERSION"
  {
    printf 'package main\n\nimport (\n\t"github.com/coredns/coredns/coremain"\n'
    printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "${COREDNS_PLUGINS[@]}"
    printf ')\n\nfunc main() { coremain.Run() }\n'
  } >"$dir/main.go"
  (cd "$dir" && go get "github.com/coredns/coredns@$COREDNS_VERSION" && go mod tidy &&
    go build -trimpath -ldflags "-s -w" -o "$bin_dir/coredns" .)
}

build_pause() {  # the pod sandbox's one process: waits for a signal, reaps nothing else
  local dir="$work_dir/pause"
  mkdir -p "$dir"
  printf 'module trainingjob.io/pause\n\ngo 1.24.0\n' >"$dir/go.mod"
  cat >"$dir/main.go" <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
GO
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$bin_dir/pause" .)
}

total=$SECONDS
log "cache: $bin_dir"
for name in kubelet kube-proxy; do
  already "$name" || timed "$name" build_kube "$name"
done
already coredns || timed coredns build_coredns
already pause || timed pause build_pause
log "node binaries ready in $((SECONDS - total)) s"
echo "$bin_dir"
