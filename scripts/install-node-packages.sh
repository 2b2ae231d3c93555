#!/usr/bin/env bash
# Installs the Debian packages the node tier needs (containerd, runc, CNI plugins, iptables, conntrack), those
# that build our images (podman, buildah, mmdebstrap, fuse-overlayfs, uidmap) and the headless browser the
# dashboard's tests and benchmark drive (chromium, chromium-driver). A no-op when all are there.
# Needs root (or sudo) and Debian's package mirror.
set -euo pipefail

packages=(containerd runc containernetworking-plugins iptables conntrack podman buildah mmdebstrap
  fuse-overlayfs uidmap chromium chromium-driver)
log() { printf '[node-packages] %s\n' "$*" >&2; }

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { log "ERROR: installing ${missing[*]} needs root"; exit 1; }
  sudo=(sudo)
fi
log "installing ${missing[*]}"
start=$SECONDS
"${sudo[@]}" apt-get update -qq
# The containerd package would start a system containerd where an init system runs: the node tier runs its own.
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "installed in $((SECONDS - start)) s"
