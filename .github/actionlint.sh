#!/usr/bin/env bash
# Lints the GitHub Actions workflows with actionlint (and, when installed, shellcheck on their
# `run:` scripts). actionlint is built once from the Go module proxy at a pinned version into
# .tools/actionlint/ and reused while it reports that version. Run by .ci/run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version="v1.7.12"
bin="$root/.tools/actionlint/actionlint"

if ! { [ -x "$bin" ] && [ "$("$bin" -version 2>/dev/null | head -n 1)" = "$version" ]; }; then
  go="$(command -v go || echo /usr/local/go/bin/go)"
  [ -x "$go" ] || { echo "actionlint: no Go toolchain to build it with (install Go, or put go on PATH)" >&2; exit 1; }
  echo "actionlint: building $version from the Go module proxy into .tools/actionlint/" >&2
  # A private GOBIN, then an atomic rename: safe when two checkouts share .tools/.
  staging="$(mktemp -d "${TMPDIR:-/tmp}/actionlint.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  GOBIN="$staging" GOFLAGS=-buildvcs=false "$go" install "github.com/rhysd/actionlint/cmd/actionlint@$version"
  mkdir -p "$(dirname "$bin")"
  mv -f "$staging/actionlint" "$bin"
fi

cd "$root"
"$bin" -version | head -n 1
"$bin" -no-color
echo "workflows: actionlint passed"
