# cni-steward image: the stewardd daemon (ENTRYPOINT, under tini) plus the static shim that
# `stewardd install` copies onto the node. Three stages: the shim, built by the Go toolchain of the
# official Go image (GO_IMAGE; Go's standard library only: nothing is fetched); the daemon, built with
# dev dependencies and tsc; the runtime, with production dependencies, better-sqlite3's prebuilt addon
# and the shim, and no compiler, npm or yarn.
# The Node stages use the same Node image so the addon's ABI matches. One image per CPU architecture:
# it carries the shim for its own architecture, which runs on glibc and musl hosts alike
# (docs/packaging.md).
ARG NODE_IMAGE=node:24-bookworm-slim
# The Go the image's shim is built with, pinned to the patch release: the same source, version stamp and
# Go give the same bytes. At least the `go` line of shim/go.mod. Only its /usr/local/go is used (a
# builder without a registry makes a stand-in from its own Go: scripts/build-image.sh).
ARG GO_IMAGE=golang:1.26.8-bookworm

FROM ${GO_IMAGE} AS go

# The shim stage runs on the Node image (scripts/build-shims.mjs is run by node) with the Go toolchain
# of GO_IMAGE. Debian bookworm's own golang-go is Go 1.19, older than shim/go.mod allows.
FROM ${NODE_IMAGE} AS shim
COPY --from=go /usr/local/go/ /usr/local/go/
ENV PATH=/usr/local/go/bin:$PATH
WORKDIR /src
COPY package.json ./
COPY shim/ shim/
COPY scripts/build-shims.mjs scripts/
# The commit stamped into the shim's version (package.json's version +<commit>): the build context
# has no .git (.dockerignore); scripts/build-image.sh passes the checkout's short commit.
ARG STEWARD_COMMIT=
# dist/shims/steward-linux-<arch>: static (CGO_ENABLED=0), -trimpath, stripped, its version in
# main.version (scripts/build-shims.mjs); build-shims.mjs fails in one line if this Go is older than
# shim/go.mod's.
RUN node scripts/build-shims.mjs --targets host && go version dist/shims/*

FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ file \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# better-sqlite3 13 ships its addon prebuilt for each platform inside the npm package (no compile);
# should any dependency compile one, node-gyp uses the headers that come with Node in the image
# (/usr/local/include/node) and downloads nothing.
ENV npm_config_nodedir=/usr/local npm_config_update_notifier=false
COPY package.json package-lock.json tsconfig.json tsconfig.base.json ./
COPY shared/package.json shared/
COPY daemon/package.json daemon/
# The root `prepare` script builds, and the sources are not here yet: install first, then run
# only the install script that matters (esbuild's binary, for tsx), and load the sqlite addon.
# A builder whose npm registry needs an extra CA passes it as the build secret `npm-ca`
# (scripts/build-image.sh does); it is read from /run/secrets for these steps, never stored in a
# layer. `npm ci` can exit 0 after "Exit handler never called!" with a partial tree: `npm ls` checks.
RUN --mount=type=secret,id=npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm-ca; fi \
 && npm ci --ignore-scripts --no-audit --no-fund \
 && npm ls --all >/dev/null \
 && npm rebuild esbuild \
 && node -e "new (require('better-sqlite3'))(':memory:').close()"
COPY shared/ shared/
COPY daemon/ daemon/
COPY bin/stewardd bin/
# The daemon only (tsc): the shim comes from the shim stage.
RUN npx tsc -b
# Production dependencies only; of
# better-sqlite3 only its JS and the prebuilt addon for this image (glibc, this CPU).
RUN npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/.cache \
 && cd node_modules/better-sqlite3 \
 && keep="linux-$(node -p process.arch).node" \
 && test -f "prebuilds/$keep" \
 && find prebuilds -type f ! -name "$keep" -delete \
 && rm -rf deps src binding.gyp \
 && cd /src && node -e "new (require('better-sqlite3'))(':memory:').close()"

FROM ${NODE_IMAGE} AS runtime
# iptables: the delegate plugins the daemon runs (bridge ipMasq, portmap) call it, and the audit reads
# portmap's rules with iptables-save. (flock, which the audit holds host-local's lock with, and
# nsenter, which starts each plugin in the node's mount namespace under --plugin-mount-ns, are in
# util-linux, which every Debian image has.)
# tini: reaps orphans (a plugin's children left behind would otherwise stay zombies under node,
# which does not reap processes it did not fork); -s makes it a child subreaper, so it also reaps
# them when it is not PID 1 (hostPID: true in deploy/daemonset.yaml).
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables tini \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
           /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg /usr/local/include/node
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules/ node_modules/
COPY --from=build /src/shared/package.json shared/
COPY --from=build /src/shared/dist/ shared/dist/
COPY --from=build /src/daemon/package.json daemon/
COPY --from=build /src/daemon/dist/ daemon/dist/
COPY --from=build /src/daemon/proto/ daemon/proto/
COPY --from=build /src/bin/stewardd bin/
# stewardd install's default --shim is <app>/dist/shims/steward-linux-<arch>.
COPY --from=shim /src/dist/shims/ dist/shims/
ENV NODE_ENV=production
ENTRYPOINT ["/usr/bin/tini", "-s", "--", "node", "/app/daemon/dist/main.js"]
CMD ["run"]
