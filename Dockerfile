# cni-steward image: the stewardd daemon (ENTRYPOINT) plus the single-executable shim that
# `stewardd install` copies onto the node. Two stages: build with dev dependencies and a
# compiler (better-sqlite3's addon, tsc, Bun for dist/steward); run with production
# dependencies, the compiled addon and the shim, and no compiler, npm or yarn.
# Both stages use the same Node image so the addon's ABI matches.
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.base.json ./
COPY shared/package.json shared/
COPY daemon/package.json daemon/
COPY shim/package.json shim/
# The root `prepare` script builds, and the sources are not here yet: install first, then run
# only the install scripts that matter (the sqlite addon, Bun's binary, esbuild's binary).
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild better-sqlite3 bun esbuild
COPY shared/ shared/
COPY daemon/ daemon/
COPY shim/ shim/
COPY scripts/bundle-shim.mjs scripts/
COPY bin/stewardd bin/
RUN npm run build && test -x dist/steward
RUN npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE} AS runtime
# iptables: the delegate plugins the daemon runs (bridge ipMasq, portmap) call it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends iptables \
 && rm -rf /var/lib/apt/lists/* \
 && rm -rf /usr/local/lib/node_modules/npm /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
           /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules/ node_modules/
COPY --from=build /src/shared/package.json shared/
COPY --from=build /src/shared/dist/ shared/dist/
COPY --from=build /src/daemon/package.json daemon/
COPY --from=build /src/daemon/dist/ daemon/dist/
COPY --from=build /src/bin/stewardd bin/
# stewardd install's default --shim is <app>/dist/steward, the same layout as a checkout.
COPY --from=build /src/dist/steward dist/steward
ENV NODE_ENV=production
ENTRYPOINT ["node", "/app/daemon/dist/main.js"]
CMD ["run"]
