#!/usr/bin/env bash
# Builds the project's container images from their Dockerfiles with podman (no Docker engine needed) and writes
# each as a docker-archive that `ctr -n k8s.io images import` loads with both of its tags.
#   bash scripts/build-images.sh [trainer|operator|api|provisioner ...]     (default: all four)
# provisioner is the node tier's volume provisioner (testbed/provisioner), not a product image.
# Stdout: one line per image, "<name> <key> <archive> <public-ref>"; logs go to stderr.
# Every Dockerfile takes its base as the build argument PYTHON_IMAGE, whose default is Docker Hub's
# python:3.11-slim-bookworm by digest; here it is a stand-in made locally from Debian packages (mmdebstrap), so
# only PyPI and Debian's mirror need to be reachable. Each image is built once per key, the
# sha256 of its Dockerfile, the files it copies and the base recipe; the archive is the cache.
# Podman's storage lives under the cache (never /var/lib/containers).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
cache_root=${TJ_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainingjob}
img_dir="$cache_root/images"

exec 3>&1 1>&2  # every tool's output goes to stderr; the result lines go to fd 3 (the real stdout)
log() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

ALL_IMAGES=(trainer operator api provisioner)
names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ALL_IMAGES[@]}")
for name in "${names[@]}"; do
  case $name in trainer|operator|api|provisioner) ;; *) die "unknown image '$name' (expected: ${ALL_IMAGES[*]})" ;; esac
done

# The base image: Debian bookworm with its python3 (3.11), pip and venv, standing in for python:3.11-slim-bookworm.
# Every line here goes into each image's key: change the recipe and every image is rebuilt.
BASE_SUITE=bookworm
BASE_PACKAGES=python3,python3-pip,python3-venv,ca-certificates,passwd
BASE_RECIPE="r2 mmdebstrap --variant=minbase $BASE_SUITE {main,updates,security} include=$BASE_PACKAGES
nodocs; rm EXTERNALLY-MANAGED; /usr/local/bin/python->python3, pip->pip3; empty /etc/pip.conf
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8; CMD [\"python3\"]"
DEBIAN_MIRROR=${TJ_DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY_MIRROR=${TJ_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# The host's CA bundle and pip config, mounted read-only into every RUN step where the host has them (never
# copied into an image; the base image has both files, so not even a mount point lands in a layer): pip must
# trust whatever proxy the host's network re-signs TLS with.
HOST_CA=/etc/ssl/certs/ca-certificates.crt
HOST_PIP_CONF=/etc/pip.conf

command -v podman >/dev/null || die "podman is not on PATH; install it (apt-get install podman fuse-overlayfs uidmap)"
command -v mmdebstrap >/dev/null || die "mmdebstrap is not on PATH; install it (apt-get install mmdebstrap)"
command -v git >/dev/null || die "git is not on PATH"
[ "$(id -u)" = 0 ] || die "building the images needs root (podman storage and mmdebstrap's chroot mode)"

mkdir -p "$img_dir/podman/root" "$img_dir/podman/run" "$img_dir/podman/libpod" "$img_dir/podman/net" \
  "$img_dir/podman/runc" "$img_dir/tmp"
export TMPDIR="$img_dir/tmp"
pm() {  # podman with all of its state under the cache
  podman --root "$img_dir/podman/root" --runroot "$img_dir/podman/run" --tmpdir "$img_dir/podman/libpod" \
    --network-config-dir "$img_dir/podman/net" --storage-driver overlay --cgroup-manager cgroupfs \
    --events-backend file "$@"
}

exec 9>"$img_dir/.lock"
flock 9 || die "could not lock $img_dir/.lock"

# Podman 4.3 writes a few files outside its --root whatever it is told (the blob info cache and the short-name
# alias lock are at fixed paths for root), and mmdebstrap's mounts leave libmount's /run/mount: remove at exit
# those that were not there when this run took the lock (directories only when empty).
droppings=(/var/lib/containers/cache/blob-info-cache-v1.boltdb /var/lib/containers/cache /var/lib/containers
  /var/cache/containers/short-name-aliases.conf.lock /var/cache/containers /run/runc /run/mount)
created=()
for path in "${droppings[@]}"; do [ -e "$path" ] || created+=("$path"); done
tidy() {
  local path
  for path in "${created[@]}"; do
    if [ -d "$path" ]; then rmdir "$path" 2>/dev/null || true; else rm -f "$path"; fi
  done
}
trap tidy EXIT

timed() {  # timed WHAT CMD...: run a step, report its duration, stop on failure
  local what=$1; shift
  local start=$SECONDS
  log "$what ..."
  "$@" || die "$what failed (see the output above)"
  log "$what: done in $((SECONDS - start)) s"
}

hash12() { sha256sum | cut -c1-12; }
base_key=$(printf '%s' "$BASE_RECIPE" | hash12)
base_ref="localhost/trainingjob/base:$base_key"

make_base() {
  local rootfs="$img_dir/tmp/base-$base_key.tar" nodocs=()
  # $1 is mmdebstrap's: the root of the new file system. An empty /etc/pip.conf is the target the host's is
  # mounted on during builds: without it every RUN layer would keep the (empty) mount point.
  # shellcheck disable=SC2016
  local hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED && ln -sf /usr/bin/python3 "$1"/usr/local/bin/python &&
    ln -sf /usr/bin/pip3 "$1"/usr/local/bin/pip && : >"$1"/etc/pip.conf'
  nodocs=(--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-exclude=/usr/share/info/*')
  rm -f "$rootfs"
  mmdebstrap --variant=minbase --include="$BASE_PACKAGES" "${nodocs[@]}" --customize-hook="$hook" \
    "$BASE_SUITE" "$rootfs" \
    "deb $DEBIAN_MIRROR $BASE_SUITE main" \
    "deb $DEBIAN_MIRROR $BASE_SUITE-updates main" \
    "deb $DEBIAN_SECURITY_MIRROR $BASE_SUITE-security main"
  pm import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    "$rootfs" "$base_ref"
  rm -f "$rootfs"
}

ensure_base() {
  # A build interrupted (Ctrl-C, a killed `make`) leaves its working containers in this store, and they hold the
  # layers the next build reuses, so that build could not remove its image after saving it. Under the lock no
  # other build runs: every working container here is such a leftover.
  local leftover
  for leftover in $(pm ps --all --external --noheading --format '{{.ID}}'); do
    log "removing the working container $leftover of an interrupted build"
    pm rm --force "$leftover" >/dev/null
  done
  if pm image exists "$base_ref"; then
    log "base image $base_ref: reused"
  else
    timed "base image $base_ref (mmdebstrap $BASE_SUITE: ${BASE_PACKAGES//,/ })" make_base
  fi
  local old
  for old in $(pm images --noheading --format '{{.Repository}}:{{.Tag}}'); do
    case $old in
      "$base_ref") ;;
      localhost/trainingjob/base:*) log "removing the old base image $old"
        pm rmi --force "$old" >/dev/null || log "WARNING: could not remove $old" ;;
    esac
  done
  # Earlier runs tagged the stand-in with Docker Hub's names; no build reads them now (PYTHON_IMAGE names it).
  for old in docker.io/library/python:3.11-slim docker.io/library/python:3.11-slim-bookworm; do
    pm untag "$base_ref" "$old" 2>/dev/null || true
  done
}

# Per image: its Dockerfile, its build context (relative to the repository) and the paths it copies from there.
dockerfile_of() {
  case $1 in
    trainer) echo trainer-image/Dockerfile ;;
    provisioner) echo testbed/provisioner/Dockerfile ;;
    *) echo "$1/Dockerfile" ;;
  esac
}
context_of() { case $1 in trainer) echo trainer-image ;; provisioner) echo testbed/provisioner ;; *) echo . ;; esac; }
sources_of() {
  case $1 in
    trainer) echo trainer-image/requirements.lock trainer-image/trainer ;;
    operator) echo operator/requirements.lock operator/trainingjob ;;
    api) echo api/requirements.lock operator/trainingjob api/trainingjob_api api/trainingjob_sdk ;;
    provisioner) echo testbed/provisioner/provisioner.py ;;
  esac
}
public_ref_of() {  # the name users' manifests use: the CRD's default trainer image and the chart's repositories
  case $1 in
    trainer) echo ghcr.io/trainingjob/trainer:0.1.0 ;;
    operator) echo "ghcr.io/trainingjob/trainingjob-operator:$2" ;;
    api) echo "ghcr.io/trainingjob/trainingjob-api:$2" ;;
    provisioner) echo "localhost/testbed/volume-provisioner:$2" ;;  # never pulled: the node tier's own
  esac
}

files_of() {  # files_of NAME: NUL-separated files (tracked or untracked, never ignored) the build copies
  local srcs
  read -r -a srcs <<<"$(sources_of "$1")"
  (cd "$repo" && git ls-files -z --cached --others --exclude-standard -- "${srcs[@]}" |
    while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done | LC_ALL=C sort -z)
}

key_of() {  # key_of NAME: 12 hex of the sha256 over the base recipe, the Dockerfile and every copied file
  local name=$1 df f
  df=$(dockerfile_of "$name")
  {
    printf 'image %s\nbase %s\n' "$name" "$BASE_RECIPE"
    printf 'file %s %s\n' "$df" "$(sha256sum <"$repo/$df" | cut -d' ' -f1)"
    files_of "$name" | while IFS= read -r -d '' f; do
      printf 'file %s %s\n' "$f" "$(sha256sum <"$repo/$f" | cut -d' ' -f1)"
    done
  } | hash12
}

stage_context() {  # stage_context NAME DIR: the Dockerfile and exactly the hashed files, nothing else
  local name=$1 dir=$2 ctx
  ctx=$(context_of "$name")
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$repo" && files_of "$name" | tar -c --null -T - -f -) | tar -x -f - -C "$dir"
  [ "$ctx" = . ] || { mv "$dir/$ctx" "$dir.ctx" && rm -rf "$dir" && mv "$dir.ctx" "$dir"; }
  cp "$repo/$(dockerfile_of "$name")" "$dir/Dockerfile.build"
}

build_image() {  # build_image NAME KEY ARCHIVE PUBLIC_REF
  local name=$1 key=$2 archive=$3 public=$4 local_ref="localhost/trainingjob/$1:$2" work="$img_dir/tmp/$1-$2"
  local build_args=(--pull=never --network=host --layers --force-rm --runtime-flag "root=$img_dir/podman/runc"
    --build-arg "PYTHON_IMAGE=$base_ref" -f Dockerfile.build -t "$local_ref" -t "$public") host_file
  for host_file in "$HOST_CA" "$HOST_PIP_CONF"; do
    if [ -f "$host_file" ]; then build_args+=(-v "$host_file:$host_file:ro"); fi
  done
  stage_context "$name" "$work/context"
  timed "$name: podman build ($local_ref)" pm build "${build_args[@]}" "$work/context"
  rm -f "$archive.tmp"
  timed "$name: podman save -> $archive" pm save --format docker-archive -o "$archive.tmp" "$local_ref" "$public"
  mv -f "$archive.tmp" "$archive"
  log "$name: archive $(du -h "$archive" | cut -f1)"
  # Keep this archive only: a trainer archive is 5.7 GiB, and the node's containerd holds another copy.
  find "$img_dir" -maxdepth 1 -name "$name-*.tar" -printf '%T@ %p\n' | sort -rn | tail -n +2 | cut -d' ' -f2- |
    while IFS= read -r old; do log "$name: removing the old archive $old"; rm -f "$old"; done
  pm rmi "$local_ref" "$public" >/dev/null
  pm image prune -f >/dev/null  # the build's intermediate layers; the base image stays
  rm -rf "$work"
}

total=$SECONDS
log "cache: $img_dir (base key $base_key)"
base_ready=false
results=()
for name in "${names[@]}"; do
  key=$(key_of "$name")
  archive="$img_dir/$name-$key.tar"
  public=$(public_ref_of "$name" "$key")
  if [ -s "$archive" ]; then
    log "$name: $archive reused"
  else
    if [ "$base_ready" = false ]; then ensure_base; base_ready=true; fi
    start=$SECONDS
    build_image "$name" "$key" "$archive" "$public"
    log "$name: built in $((SECONDS - start)) s"
  fi
  results+=("$name $key $archive $public")
done
log "images ready in $((SECONDS - total)) s"
printf '%s\n' "${results[@]}" >&3
