#!/usr/bin/env bash
# Pins k8s.io/kubernetes and the etcd it was released with, and points every staging module it
# requires at v0.0.0 to its published twin (k8s.io/X v0.MINOR.PATCH), read from kubernetes' own
# go.mod so that a version bump never depends on a hand-typed list.
# Usage: gen-replaces.sh [v1.35.x]   (default: the version already required in go.mod)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
export GOFLAGS=-mod=mod

version="${1:-$(go list -m -f '{{.Version}}' k8s.io/kubernetes)}"
[[ "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] || {
  echo "gen-replaces.sh: '$version' is not a kubernetes release (want v1.MINOR.PATCH)" >&2
  exit 2
}
staging_version="v0.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"

k8s_gomod="$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')"
[ -f "$k8s_gomod" ] || { echo "gen-replaces.sh: no go.mod downloaded for k8s.io/kubernetes@$version" >&2; exit 1; }

# Staging modules appear in kubernetes' go.mod as "k8s.io/X => ./staging/src/k8s.io/X".
mapfile -t staging < <(sed -n 's#^\t\(k8s\.io/[^ ]*\) => \./staging/src/.*#\1#p' "$k8s_gomod")
[ "${#staging[@]}" -gt 20 ] || { echo "gen-replaces.sh: found only ${#staging[@]} staging modules in $k8s_gomod" >&2; exit 1; }

# The etcd server kubernetes was tested with (it requires it indirectly through the apiserver).
etcd_version="$(sed -n 's#^\tgo\.etcd\.io/etcd/server/v3 \(v[^ ]*\).*#\1#p' "$k8s_gomod")"

# Drop every replace first so that a staging module removed upstream does not linger.
args=()
while read -r old; do args+=(-dropreplace="$old"); done < <(sed -n 's#^\(replace \|\t\)\(k8s\.io/[^ ]*\) => .*#\2#p' go.mod)
args+=(-require="k8s.io/kubernetes@$version" -require="go.etcd.io/etcd/server/v3@$etcd_version")
for module in "${staging[@]}"; do args+=(-replace="$module=$module@$staging_version"); done
go mod edit "${args[@]}"
go mod tidy
echo "k8s.io/kubernetes $version, ${#staging[@]} staging modules at $staging_version, etcd $etcd_version"
