#!/usr/bin/env bash
# Chart and manifest checks for CI: helm lint --strict and helm template over every value set in
# charts/pglease/ci/, the sidecar patch applied to a sample Deployment (kubectl patch --local),
# then every rendered object validated against the Kubernetes schemas and types
# (test/chart/validate-manifests.ts). Self-contained (fetches helm and kubectl once into .tools/)
# and idempotent (renders into a fresh .tools/chart-render/ each run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

bash test/chart/fetch-kube-tools.sh
helm="$root/.tools/helm/helm"
kubectl="$root/.tools/kubectl/kubectl"
chart="charts/pglease"
out="$root/.tools/chart-render"
rm -rf "$out" && mkdir -p "$out"

echo "helm $("$helm" version --short)"
for values in "$chart"/ci/*.yaml; do
  name="$(basename "$values" .yaml)"
  echo "--- $name: lint"
  "$helm" lint --strict "$chart" -f "$values" --namespace pglease-ci
  echo "--- $name: template"
  "$helm" template pglease "$chart" -f "$values" --namespace pglease-ci >"$out/$name.yaml"
done

echo "--- deploy/sidecar: patch a sample Deployment"
# Offline: no kubeconfig, no server; kubectl applies the strategic merge patch locally.
KUBECONFIG=/dev/null "$kubectl" patch --local --type strategic -o yaml \
  -f test/chart/fixtures/existing-deployment.yaml \
  --patch-file deploy/sidecar/sidecar-patch.yaml >"$out/sidecar-patched-deployment.yaml"

echo "--- validate against the Kubernetes schemas and types"
bash scripts/with-node.sh node test/chart/validate-manifests.ts "$out"/*.yaml \
  deploy/sidecar/rbac.yaml deploy/examples/leader-service.yaml
echo "chart checks passed"
