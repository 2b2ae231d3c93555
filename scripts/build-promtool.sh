#!/usr/bin/env bash
# Builds promtool (Prometheus' rule checker and rule unit-test runner) from the Go module proxy into a versioned
# cache outside the clone, and prints the path of the binary. Built once per cache key; tests/unit/test_alerts.py
# runs it on the chart's alert rules (TJ_PROMTOOL is that path).
set -euo pipefail

# Prometheus publishes its Go module as v0.<major><minor>.<patch>: v0.308.1 is Prometheus 3.8.1, the newest whose
# go.mod asks for no Go newer than 1.24 (the floor `make test` promises).
PROMETHEUS_VERSION=v0.308.1
# Bump when the build recipe itself changes in a way that changes the binary.
PROMTOOL_RECIPE=2

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=controlplane.env
source "$here/controlplane.env"  # gobuild.sh probes the checksum database with KWOK_VERSION

key="prometheus-${PROMETHEUS_VERSION}_r${PROMTOOL_RECIPE}"
TAG=promtool
# shellcheck source=gobuild.sh
source "$here/gobuild.sh"
cache_dirs promtool "$key"

# Not `go install promtool@version`: Prometheus' go.mod has exclude directives, which go install refuses. A wrapper
# module requires it instead, with the same excludes, so the build resolves as Prometheus' own does.
build_promtool() {
  local dir="$work_dir/prometheus" module=github.com/prometheus/prometheus excludes release minor
  minor=${PROMETHEUS_VERSION#v0.}  # 308.1
  release="$((${minor%%.*} / 100)).$((${minor%%.*} % 100)).${minor#*.}"  # 3.8.1
  wrapper "$dir" "$module" "$PROMETHEUS_VERSION"
  excludes=$(go mod edit -json "$(module_gomod "$module@$PROMETHEUS_VERSION")" |
    python3 -c 'import json,sys; print(*("-exclude=%s@%s" % (e["Path"], e["Version"]) for e in json.load(sys.stdin).get("Exclude") or []))')
  # shellcheck disable=SC2086  # one flag per excluded module version
  (cd "$dir" && { [ -z "$excludes" ] || go mod edit $excludes; } && go get "$module@$PROMETHEUS_VERSION" &&
    go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
      -o "$bin_dir/promtool" "$module/cmd/promtool")
}

[ -x "$bin_dir/promtool" ] || timed promtool build_promtool
"$bin_dir/promtool" --version >/dev/null || die "$bin_dir/promtool does not run"
echo "$bin_dir/promtool"
