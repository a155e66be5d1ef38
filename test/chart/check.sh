#!/usr/bin/env bash
# Chart and manifest checks for CI: helm lint --strict and helm template over every value set in
# charts/pglease/ci/, the pglease-sidecar library chart linted and rendered through the example
# chart that uses it (deploy/examples/existing-chart), the sidecar patch applied to a sample
# Deployment (kubectl patch --local), then every rendered object validated against the
# Kubernetes schemas and types (test/chart/validate-manifests.ts). Self-contained (fetches helm
# and kubectl once into .tools/) and idempotent (renders into a fresh .tmp/chart-render/ each
# run, in this checkout: .tools/ may be shared between checkouts).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

bash test/chart/fetch-kube-tools.sh
helm="$root/.tools/helm/helm"
kubectl="$root/.tools/kubectl/kubectl"
chart="charts/pglease"
out="$root/.tmp/chart-render"
rm -rf "$out" && mkdir -p "$out"

echo "helm $("$helm" version --short)"
for values in "$chart"/ci/*.yaml; do
  name="$(basename "$values" .yaml)"
  echo "--- $name: lint"
  "$helm" lint --strict "$chart" -f "$values" --namespace pglease-ci
  echo "--- $name: template"
  "$helm" template pglease "$chart" -f "$values" --namespace pglease-ci >"$out/$name.yaml"
done

echo "--- defaults where the API server has ValidatingAdmissionPolicy: template"
"$helm" template pglease "$chart" -f "$chart/ci/defaults.yaml" --namespace pglease-ci \
  --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy >"$out/admission-policy.yaml"

echo "--- charts/pglease-sidecar (library): lint"
"$helm" lint --strict charts/pglease-sidecar
example="deploy/examples/existing-chart"
echo "--- $example (uses the library): lint"
"$helm" lint --strict "$example" --namespace pglease-ci
echo "--- $example: template"
"$helm" template orders "$example" --namespace pglease-ci >"$out/existing-chart.yaml"

echo "--- deploy/sidecar: patch a sample Deployment"
# Offline: no kubeconfig, no server; kubectl applies the strategic merge patch locally.
KUBECONFIG=/dev/null "$kubectl" patch --local --type strategic -o yaml \
  -f test/chart/fixtures/existing-deployment.yaml \
  --patch-file deploy/sidecar/sidecar-patch.yaml >"$out/sidecar-patched-deployment.yaml"

echo "--- validate against the Kubernetes schemas and types"
bash scripts/with-node.sh node test/chart/validate-manifests.ts "$out"/*.yaml \
  deploy/sidecar/rbac.yaml deploy/sidecar/admission-policy.yaml deploy/examples/leader-service.yaml
echo "chart checks passed"
