#!/usr/bin/env bash
# Builds the real single-node cluster's programs once, into .tools/kube-cluster/<key>/, the key
# naming the Kubernetes and containerd versions and a hash of test/kube-cluster-go's module files,
# so that a change to any of them builds anew:
#   kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl   (test/kube-cluster-go)
#   containerd, containerd-shim-runc-v2, ctr                                (test/kube-cluster-go/containerd)
# The API server and its etcd are the tests' own (scripts/build-kube-apiserver.sh). The Debian
# packages the node needs (runc, the CNI plugins, buildah, iptables, conntrack) are installed
# with apt-get when missing.
#   build-kube-cluster.sh            build when missing; print the directory
#   build-kube-cluster.sh --path     print the directory if everything is there; else exit 3 with
#                                    the reason on stderr (the cluster suites then skip)
# Kubernetes 1.35 is pinned on purpose: it is the last release whose kubelet still runs on a
# cgroup v1 host (failCgroupV1: false), and the machines here offer only cgroup v1.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
module="$root/test/kube-cluster-go"
mode="${1:-}"

fail() { # reason
  echo "kube-cluster: $1" >&2
  [ "$mode" = "--path" ] && exit 3
  exit 1
}

command -v go >/dev/null 2>&1 || fail "Go is not installed; the cluster cannot be built here"
[ "$(id -u)" = 0 ] || fail "not root; the node's containerd, kubelet and network namespace need root"

kubernetes="$(sed -n 's#^\tk8s\.io/kubernetes \(v[^ ]*\).*$#\1#p' "$module/go.mod")"
containerd="$(sed -n 's#^\tgithub\.com/containerd/containerd/v2 \(v[^ ]*\).*$#\1#p' "$module/containerd/go.mod")"
sources="$(cd "$module" && cat go.mod go.sum containerd/go.mod containerd/go.sum | sha256sum | cut -c1-12)"
dir="$root/.tools/kube-cluster/k8s-$kubernetes-containerd-$containerd-$sources"
programs=(kubelet kube-controller-manager kube-scheduler kube-proxy kubectl containerd containerd-shim-runc-v2 ctr)
# Debian packages: command they provide -> package.
declare -A debian=([runc]=runc [/usr/lib/cni/bridge]=containernetworking-plugins [buildah]=buildah
  [iptables]=iptables [conntrack]=conntrack [ip]=iproute2 [openssl]=openssl)

have() { [ -x "$1" ] || command -v "$1" >/dev/null 2>&1; }
missing_packages() { for c in "${!debian[@]}"; do have "$c" || echo "${debian[$c]}"; done | sort -u; }
built() { for p in "${programs[@]}"; do [ -x "$dir/$p" ] || return 1; done; }

if [ "$mode" = "--path" ]; then
  built || fail "not built for these sources; run: bash scripts/build-kube-cluster.sh (a cold build takes about 12 minutes of 2 cores)"
  packages="$(missing_packages | tr '\n' ' ')"
  [ -z "$packages" ] || fail "Debian packages missing: $packages(run: bash scripts/build-kube-cluster.sh)"
  echo "$dir"
  exit 0
fi

packages="$(missing_packages)"
if [ -n "$packages" ]; then
  command -v apt-get >/dev/null 2>&1 || fail "no apt-get to install: $(echo $packages)"
  echo "kube-cluster: installing Debian packages: $(echo $packages)" >&2
  apt-get update -qq >&2
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $packages >&2
fi

if ! built; then
  minor="$(echo "$kubernetes" | cut -d. -f2)"
  # /version and the node's kubeletVersion then report the release, as a released binary would.
  k8s_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kubernetes"
  k8s_ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  containerd_ldflags="-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd"
  echo "kube-cluster: building k8s.io/kubernetes $kubernetes and containerd $containerd into $dir" >&2
  # Built aside and renamed into place: a build cut short never looks finished.
  rm -rf "$dir.partial" && mkdir -p "$dir.partial"
  started=$SECONDS
  # containerd: no cgo (static), and without the snapshotters that would need C libraries.
  (cd "$module/containerd" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -p "${GO_BUILD_JOBS:-2}" -trimpath \
    -tags "no_btrfs no_devmapper" -ldflags "$containerd_ldflags" -o "$dir.partial/" tool)
  echo "kube-cluster: containerd built in $((SECONDS - started)) s" >&2
  started=$SECONDS
  # -mod=mod: the module keeps no vendor directory; go.sum pins every download.
  (cd "$module" && GOFLAGS=-mod=mod go build -p "${GO_BUILD_JOBS:-2}" -trimpath -ldflags "$k8s_ldflags" \
    -o "$dir.partial/" tool)
  echo "kube-cluster: Kubernetes components built in $((SECONDS - started)) s, $(du -sm "$dir.partial" | cut -f1) MB in all" >&2
  rm -rf "$dir" && mv "$dir.partial" "$dir"
fi
echo "$dir"
