#!/usr/bin/env bash
# Builds test/kube-apiserver-go (the real kube-apiserver over an embedded etcd, for the tests and the
# bench, and the bench's client-go elector beside it) once, into .tools/kube-apiserver/<key>/, the
# key naming the Kubernetes and etcd versions and a hash of the module's sources, so that a change
# to any of them builds anew.
#   build-kube-apiserver.sh            build when missing; print the API server binary's path
#   build-kube-apiserver.sh --path     print the path if built; else exit 3 with the reason on stderr
# The elector is client-go-elector in the same directory.
# Without Go it says so in one line and exits 0 (the suites then skip), or 3 with --path.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$root/test/kube-apiserver-go"

if ! command -v go >/dev/null 2>&1; then
  echo "kube-apiserver: Go is not installed; the real-API-server suites and the client-go bench peer are skipped" >&2
  [ "${1:-}" = "--path" ] && exit 3
  exit 0
fi

# Read from go.mod without running go: --path is on every test run's start-up path.
kubernetes="$(sed -n 's#^\tk8s\.io/kubernetes \(v[^ ]*\)$#\1#p' "$module/go.mod")"
etcd="$(sed -n 's#^\tgo\.etcd\.io/etcd/server/v3 \(v[^ ]*\)$#\1#p' "$module/go.mod")"
sources="$(cd "$module" && cat go.mod go.sum $(ls ./*.go ./*/*.go 2>/dev/null | sort) | sha256sum | cut -c1-12)"
dir="$root/.tools/kube-apiserver/k8s-$kubernetes-etcd-$etcd-$sources"
binary="$dir/kube-apiserver-go"

if [ -x "$binary" ]; then
  echo "$binary"
  exit 0
fi
if [ "${1:-}" = "--path" ]; then
  echo "kube-apiserver: not built for these sources; run: bash scripts/build-kube-apiserver.sh (a cold build takes tens of minutes)" >&2
  exit 3
fi

minor="$(echo "$kubernetes" | cut -d. -f2)"
# /version then reports the release rather than v0.0.0-master, as a released binary would.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kubernetes"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
echo "kube-apiserver: building k8s.io/kubernetes $kubernetes with etcd $etcd into $dir" >&2
started=$SECONDS
# Built aside and renamed into place: a build cut short never looks finished.
rm -rf "$dir.partial" && mkdir -p "$dir.partial"
# -mod=mod: the module keeps no vendor directory; go.sum pins every download.
(cd "$module" && GOFLAGS=-mod=mod go build -p "${GO_BUILD_JOBS:-2}" -trimpath -ldflags "$ldflags" \
  -o "$dir.partial/" . ./client-go-elector)
rm -rf "$dir" && mv "$dir.partial" "$dir"
echo "kube-apiserver: built in $((SECONDS - started)) s, $(du -m "$binary" | cut -f1) MB" >&2
echo "$binary"
