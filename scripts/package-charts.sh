#!/usr/bin/env bash
# Packages the charts as the release publishes them: pglease-sidecar (the library) and pglease,
# whose charts/ holds a symlink to the library that `helm package` copies into the archive.
# Usage: scripts/package-charts.sh DEST (HELM: the helm binary, default `helm` on PATH).
# Used by .github/workflows/release.yml and by test/chart/chart-package.test.ts, which installs
# the packaged chart.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:?usage: scripts/package-charts.sh DEST}"
helm="${HELM:-helm}"
version="$("$helm" show chart "$root/charts/pglease" | sed -n 's/^version: //p')"

mkdir -p "$dest"
# helm's own lines on stderr: stdout is the two archives' paths.
"$helm" lint --strict "$root/charts/pglease-sidecar" >&2
"$helm" package "$root/charts/pglease-sidecar" --destination "$dest" >&2
"$helm" package "$root/charts/pglease" --destination "$dest" >&2
# A link that helm did not follow would leave a chart that fails at install on another machine.
listing="$(tar -tzf "$dest/pglease-$version.tgz")"
grep -qx 'pglease/charts/pglease-sidecar/Chart.yaml' <<<"$listing" || {
  echo "package-charts: pglease-$version.tgz lacks the pglease-sidecar library" >&2
  exit 1
}
echo "$dest/pglease-sidecar-$version.tgz"
echo "$dest/pglease-$version.tgz"
