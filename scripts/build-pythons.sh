#!/usr/bin/env bash
# Provides the CPython interpreters beside the project's own 3.11 that the package tier (tests/package) installs the
# wheel into: 3.12 and 3.13, the other versions pyproject.toml's requires-python promises. Prints one interpreter
# path per line; `make test` passes them to pytest joined by ':' as TJ_PYTHONS. Idempotent: a build is done once
# per cache key, under $TJ_CACHE_DIR/pythons/.
#
# Only PyPI, npm, the Go module proxy and Debian's mirror can be reached here (not python.org, not GitHub, so not
# `uv python install` either):
# - 3.13 is built from source: Debian trixie's python3.13 source package, whose orig tarball is CPython's release
#   tarball (checked against its sha256 below). About 4 minutes on 2 cores, once.
# - 3.12: no reachable registry has it (Debian went from 3.11 straight to 3.13; the npm and PyPI "portable Python"
#   packages download from GitHub when installed). The machine's own is used: python3.12 on PATH, or pyenv's. A
#   machine without one makes this script fail, and the package tests with it.
set -euo pipefail

# trixie keeps this upstream version for its lifetime (its updates change only Debian's patches), so the orig
# tarball stays in the pool.
PY313_VERSION=3.13.5
PY313_SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
# Bump when the build recipe itself changes in a way that changes the interpreter.
PY313_RECIPE=1
DEBIAN_MIRROR=${TJ_DEBIAN_MIRROR:-http://deb.debian.org/debian}

TAG=pythons
log() { printf '[%s] %s\n' "$TAG" "$*" >&2; }
die() { printf '[%s] ERROR: %s\n' "$TAG" "$*" >&2; exit 1; }

cache_root=${TJ_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/trainingjob}
pythons_dir="$cache_root/pythons"
mkdir -p "$pythons_dir"
exec 9>"$pythons_dir/.lock"
flock 9 || die "could not lock $pythons_dir/.lock"

# What the wheel's dependencies and tjctl need of the standard library: a build without one of these is broken.
MODULES="ssl, ctypes, zlib, lzma, bz2, sqlite3, readline, uuid, venv"
usable() {  # usable PYTHON MINOR: true when PYTHON runs, is CPython MINOR and has the modules above
  [ -x "$1" ] && "$1" -c "import sys, $MODULES
sys.exit(sys.implementation.name != 'cpython' or '%d.%d' % sys.version_info[:2] != '$2')" 2>/dev/null
}

build_313() {
  local key="cpython-${PY313_VERSION}_r${PY313_RECIPE}"
  local prefix="$pythons_dir/$key" python="$pythons_dir/$key/bin/python3.13"
  if ! usable "$python" 3.13; then
    local work="$pythons_dir/work-$key" tarball="python3.13_${PY313_VERSION}.orig.tar.xz" start=$SECONDS
    rm -rf "$work" "$prefix"
    mkdir -p "$work"
    log "downloading CPython $PY313_VERSION's source from Debian ($tarball)"
    curl -fsSL --retry 3 -o "$work/$tarball" "$DEBIAN_MIRROR/pool/main/p/python3.13/$tarball" ||
      die "could not download $DEBIAN_MIRROR/pool/main/p/python3.13/$tarball"
    echo "$PY313_SHA256  $work/$tarball" | sha256sum --check --quiet - || die "$tarball: sha256 mismatch"
    tar -xJf "$work/$tarball" -C "$work"
    log "building CPython $PY313_VERSION into $prefix (a few minutes, once)"
    # Into a staging prefix first: a build stopped half-way never looks finished.
    (cd "$work/Python-$PY313_VERSION" &&
      ./configure --prefix="$prefix" --with-ensurepip=no --disable-test-modules >"$work/configure.log" 2>&1 &&
      make -j"$(nproc)" >"$work/make.log" 2>&1 &&
      make install DESTDIR="$work/staging" >"$work/install.log" 2>&1) ||
      die "building CPython $PY313_VERSION failed: see the logs in $work"
    mv "$work/staging$prefix" "$prefix"
    rm -rf "$work"
    usable "$python" 3.13 || die "$python lacks one of: $MODULES (missing -dev packages when it was built?)"
    log "built CPython $PY313_VERSION in $((SECONDS - start)) s"
  fi
  echo "$python"
}

find_312() {
  local candidate
  for candidate in "$(command -v python3.12 || true)" "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12; do
    if usable "$candidate" 3.12; then
      echo "$candidate"
      return
    fi
  done
  die "no CPython 3.12 on this machine (python3.12 on PATH, or pyenv's) and no reachable registry has one"
}

find_312
build_313
