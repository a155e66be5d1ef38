#!/usr/bin/env bash
# Builds the cluster's images with Debian's buildah (no registry is reachable here), each once
# into .tools/kube-cluster/images/<name>-<key>.tar (a docker-archive that `ctr images import`
# reads), the key hashing its inputs:
#   pause       the sandbox image: test/kube-cluster-go/pause, a static Go program
#   labeller    the bench's client-go peer in the cluster: test/kube-cluster-go/client-go-labeller,
#               a static Go program (a module of its own, so the cluster programs' key stays put)
#   node-base   the tests' stand-in for the official node:24-slim: a rootfs with the Node binary
#               the project already fetches (.tools/node), npm from the npm registry, and the few
#               Debian files the Dockerfile's RUN steps use (sh, coreutils) with their libraries
#   pglease     the project's Dockerfile, unchanged, built FROM node-base (--build-arg NODE_IMAGE)
# Usage: build-images.sh pause|labeller|pglease...   prints "NAME REFERENCE ARCHIVE" per image
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tools="$root/.tools/kube-cluster"
images="$tools/images"
npm_version=11.21.2
mkdir -p "$images"
command -v buildah >/dev/null || { echo "build-images: buildah is not installed (run: bash scripts/build-kube-cluster.sh)" >&2; exit 3; }
# Its own storage, beside the archives; chroot isolation: the RUN steps need no namespaces of their own.
# The run root (mount counts, locks) is the storage's own: two storages sharing one (two clones
# building at once) unmount each other's layers mid-build ("COPY --from=...: chdir .../merged: no
# such file or directory"); worktrees whose .tools is one shared folder share one (its real path).
runroot="/run/pglease-buildah-$(cd "$tools" && pwd -P | sha256sum | cut -c1-8)"
buildah=(buildah --root "$tools/buildah/storage" --runroot "$runroot" --storage-driver overlay)
hash_of() { cat "$@" | sha256sum | cut -c1-12; }
# An image's key hashes the function that builds it, not this whole file: adding an image does not
# rebuild the others.
built_by() { declare -f "$@"; }
files_under() { find "$@" -type f | LC_ALL=C sort; }

emit() { echo "$1 $2 $3"; }

# A static Go program alone in an image: NAME REFERENCE MODULE-DIR PACKAGE USER.
build_static_go() {
  local name="$1" ref="$2" module="$3" package="$4" user="$5" key archive work ctr
  key="$(hash_of $(files_under "$module/$package" -name '*.go' -o -name 'go.*') <(built_by build_static_go))"
  archive="$images/$name-$key.tar"
  if [ ! -f "$archive" ]; then
    work="$(mktemp -d)"
    # -mod=readonly: go.sum pins every download, and a build never rewrites the module's files.
    (cd "$module" && CGO_ENABLED=0 go build -mod=readonly -trimpath -ldflags "-s -w" -o "$work/$name" "./$package")
    ctr="$("${buildah[@]}" from scratch)"
    "${buildah[@]}" copy --quiet "$ctr" "$work/$name" "/$name" >/dev/null
    "${buildah[@]}" config --entrypoint "[\"/$name\"]" --user "$user" "$ctr"
    "${buildah[@]}" commit --quiet --rm "$ctr" "$ref" >/dev/null
    "${buildah[@]}" push --quiet "$ref" "docker-archive:$archive.partial:$ref"
    mv "$archive.partial" "$archive"
    rm -rf "$work"
  fi
  emit "$name" "$ref" "$archive"
}

# Leaves node-base's reference in $node_base (built into buildah's storage when missing).
build_node_base() {
  local node="$root/.tools/node/bin/node" key ctr mnt work tarball file lib
  [ -x "$node" ] || bash "$root/scripts/with-node.sh" true
  [ -x "$node" ] || node="$(command -v node)"
  local programs=(/bin/sh /bin/dash /bin/rm /bin/ln /bin/chmod /bin/mkdir /bin/cp /bin/cat /bin/ls /usr/bin/env)
  key="$(hash_of "$node" <(built_by build_node_base) "${programs[@]}" | cut -c1-12)-npm$npm_version"
  node_base="localhost/pglease/node-base:$key"
  "${buildah[@]}" inspect --type image "$node_base" >/dev/null 2>&1 && return
  work="$(mktemp -d)"
  tarball="$(cd "$work" && npm pack --silent "npm@$npm_version" | tail -n 1)"
  ctr="$("${buildah[@]}" from scratch)"
  mnt="$("${buildah[@]}" mount "$ctr")"
  mkdir -p "$mnt"/{bin,usr/bin,usr/local/bin,usr/local/lib/node_modules/npm,tmp,etc,root,lib64}
  chmod 1777 "$mnt/tmp"
  cp "$node" "$mnt/usr/local/bin/node"
  tar -xzf "$work/$tarball" -C "$mnt/usr/local/lib/node_modules/npm" --strip-components=1
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$mnt/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$mnt/usr/local/bin/npx"
  for file in "${programs[@]}"; do cp -a "$file" "$mnt$file"; done
  # Their shared libraries, and Node's, at the paths the dynamic loader looks for them.
  for lib in $( (ldd "$node"; for file in "${programs[@]}"; do ldd "$(readlink -f "$file")"; done) |
    grep -o '/[^ ]*\.so[^ ]*' | sort -u); do
    mkdir -p "$mnt$(dirname "$lib")"
    cp -L "$lib" "$mnt$lib"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnonroot:x:65532:65532:nonroot:/home/nonroot:/bin/sh\n' >"$mnt/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$mnt/etc/group"
  "${buildah[@]}" umount "$ctr" >/dev/null
  "${buildah[@]}" config --env PATH=/usr/local/bin:/usr/bin:/bin --cmd '["node"]' "$ctr"
  "${buildah[@]}" commit --quiet --rm "$ctr" "$node_base" >/dev/null
  rm -rf "$work"
}

build_pglease() {
  local key ref archive
  build_node_base
  key="$(cd "$root" && hash_of Dockerfile .dockerignore package.json package-lock.json LICENSE tsconfig.json \
    tsconfig.build.json $(files_under src cmd) <(echo "$node_base"))"
  ref="localhost/pglease/pglease:$key"
  archive="$images/pglease-$key.tar"
  if [ ! -f "$archive" ]; then
    # The Dockerfile as releases build it; only its base differs. The host's npm cache is lent
    # to the build stages' `npm ci` (the lockfile's integrity hashes still check every package).
    "${buildah[@]}" bud --quiet --isolation chroot --pull=never --layers=false \
      --build-arg "NODE_IMAGE=$node_base" -v "$HOME/.npm:/root/.npm" \
      -t "$ref" -f "$root/Dockerfile" "$root" >&2
    "${buildah[@]}" push --quiet "$ref" "docker-archive:$archive.partial:$ref"
    mv "$archive.partial" "$archive"
  fi
  emit pglease "$ref" "$archive"
}

[ "$#" -gt 0 ] || set -- pause pglease
for image in "$@"; do
  case "$image" in
    pause) build_static_go pause localhost/pglease/pause:3.10 "$root/test/kube-cluster-go" pause 65535:65535 ;;
    labeller)
      build_static_go client-go-labeller localhost/pglease/client-go-labeller:v0.35.4 \
        "$root/test/kube-cluster-go/client-go-labeller" . 65532:65532 ;;
    pglease) build_pglease ;;
    *) echo "build-images: unknown image '$image' (pause, labeller, pglease)" >&2; exit 2 ;;
  esac
done
