# Shared helpers for the Go builds of scripts/build-controlplane.sh and scripts/build-node.sh (sourced, not run).
# The caller sets TAG (the log prefix), then calls cache_dirs KIND KEY: bin_dir and work_dir.
# shellcheck shell=bash

cache_dirs() {  # cache_dirs KIND KEY: bin_dir=<cache>/KIND/KEY and work_dir=<cache>/KIND/work-KEY, made
  local cache_root=${TJ_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainingjob}
  bin_dir="$cache_root/$1/$2"
  work_dir="$cache_root/$1/work-$2"
  mkdir -p "$bin_dir" "$work_dir"
}

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
log() { printf '[%s] %s\n' "$TAG" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$TAG" "$*" >&2; exit 1; }

command -v go >/dev/null || die "go is not on PATH; install Go >= 1.24 to build the cluster binaries"
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

build_kube() {  # build_kube NAME [KUBERNETES_WORK_DIR]: one binary of k8s.io/kubernetes/cmd
  local name=$1 dir=${2:-$work_dir/kubernetes} v=$KUBERNETES_VERSION
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
