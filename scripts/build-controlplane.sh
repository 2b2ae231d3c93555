#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, kwokctl and helm from the Go
# module proxy into a versioned cache outside the clone, and prints the folder that holds them.
# Binaries already present in $KUBEBUILDER_ASSETS are not built. Each binary is built once per cache key.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=controlplane.env
source "$here/controlplane.env"

cache_root=${TJ_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainingjob}
key="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_helm-${HELM_VERSION}_r${RECIPE}"
bin_dir="$cache_root/controlplane/$key"
work_dir="$cache_root/controlplane/work-$key"
mkdir -p "$bin_dir" "$work_dir"

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
log() { printf '[controlplane] %s\n' "$*" >&2; }
die() { printf '[controlplane] ERROR: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go >= 1.24 to build the control plane"
command -v python3 >/dev/null || die "python3 is not on PATH"

# Checksum database: use it when it answers; otherwise say so loudly and go on without it.
if [ -z "${GONOSUMDB:-}" ] && ! probe=$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" 2>&1); then
  case $probe in
    *verifying*|*sumdb*|*"checksum database"*)
      log "WARNING: the Go checksum database did not answer; building with GONOSUMDB=* (no checksum verification)"
      export GONOSUMDB='*' ;;
    *) die "the Go module proxy did not answer: $probe" ;;
  esac
fi

already() {  # already NAME: true when the binary is provided or built
  local name=$1
  if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/$name" ]; then return 0; fi
  [ -x "$bin_dir/$name" ]
}

timed() {  # timed NAME CMD...: run a build step, report its duration, stop on failure
  local name=$1; shift
  local start=$SECONDS
  log "building $name"
  "$@" || die "building $name failed (see the Go output above)"
  log "built $name in $((SECONDS - start)) s"
}

module_gomod() {  # module_gomod MODULE@VERSION: path of that module's go.mod in the module cache
  go mod download -json "$1" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error","download failed")))'
}

wrapper() {  # wrapper DIR MODULE VERSION: a module that requires MODULE@VERSION with published staging modules
  local dir=$1 module=$2 version=$3 gomod
  gomod=$(module_gomod "$module@$version")
  mkdir -p "$dir"
  printf 'module trainingjob.io/controlplane-build\n\ngo 1.24.0\n' >"$dir/go.mod"
  python3 - "$gomod" "$module" "$version" "$dir/go.mod" <<'PY'
import re, sys
src, module, version, out = sys.argv[1:]
text = open(src).read()
godebug = re.findall(r"^godebug .*$", text, re.M)
lines = [f"require {module} {version}"] + godebug
if module == "k8s.io/kubernetes":
    staging = sorted(set(re.findall(r"^\s*(k8s\.io/[\w.-]+) v0\.0\.0$", text, re.M)))
    minor = "v0." + version.split(".", 1)[1]
    lines += [f"replace {name} => {name} {minor}" for name in staging]
with open(out, "a") as f:
    f.write("\n".join(lines) + "\n")
PY
}

build_etcd() {
  local dir="$work_dir/etcd"
  wrapper "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  (cd "$dir" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" &&
    go build -trimpath -o "$bin_dir/etcd" go.etcd.io/etcd/server/v3)
}

build_kube() {  # build_kube NAME
  local name=$1 dir="$work_dir/kubernetes" v=$KUBERNETES_VERSION
  [ -f "$dir/go.mod" ] || wrapper "$dir" k8s.io/kubernetes "$v"
  local major minor
  major=${v#v}; major=${major%%.*}
  minor=${v#v*.}; minor=${minor%%.*}
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$v"
  (cd "$dir" && go get "k8s.io/kubernetes/cmd/$name@$v" &&
    go build -trimpath -tags selinux,notest -ldflags "$ldflags" -o "$bin_dir/$name" "k8s.io/kubernetes/cmd/$name")
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
