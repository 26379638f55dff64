# syntax=docker/dockerfile:1
# One image for every deepq service. The command picks the service:
#   docker run deepq planner
#   docker run deepq reflector
#   docker run deepq worker --role critic
#   docker run deepq enqueue --wait "a goal"      (the producer CLI works too)
# The build stage compiles the TypeScript (npm run build → dist/); the runtime stage holds dist/,
# bin/ and the production node_modules, no sources: bin/deepq.mjs then runs dist/ (no tsx, no tsc).
# The image ships Node 24 (LTS); the code also runs on Node 20, the floor in package.json.

ARG NODE_VERSION=24

# ---- deps: production node_modules only -------------------------------------------------
FROM node:${NODE_VERSION}-slim AS deps
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
# --ignore-scripts skips the root `prepare` (the build: it needs sources and TypeScript, which
# the build stage has); `npm rebuild` then runs the dependencies' own install scripts.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm rebuild \
 && npm cache clean --force

# ---- build: the TypeScript compiled to dist/ -------------------------------------------------
FROM node:${NODE_VERSION}-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.mjs ./scripts/
COPY bin ./bin
COPY cli ./cli
COPY services ./services
COPY shared ./shared
RUN npm run build

# ---- runtime ------------------------------------------------------------------------------
FROM node:${NODE_VERSION}-slim AS runtime
LABEL org.opencontainers.image.title="deepq" \
      org.opencontainers.image.description="Deep agents as a distributed system on BullMQ and Redis"
# HOME=/tmp: the root filesystem is read-only in compose and k8s, and /tmp (a tmpfs, an
# emptyDir) is the one writable scratch place; a stdio MCP server started with `npx` keeps its
# npm cache in $HOME/.npm (under /home/node it could not start).
ENV NODE_ENV=production \
    METRICS_PORT=9464 \
    DEEPQ_BLOB_DIR=/var/lib/deepq/blobs \
    HOME=/tmp
WORKDIR /app

# run_code's sandbox: bubblewrap (prlimit comes with util-linux) and the interpreters it runs
# (python3; node is the image's own). A worker whose role lists run_code probes it at start.
# tini: the init that runs as PID 1 (see ENTRYPOINT).
RUN apt-get update \
 && apt-get install -y --no-install-recommends bubblewrap python3 tini \
 && rm -rf /var/lib/apt/lists/*

# Code and dependencies stay owned by root and read-only for the service user.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY bin ./bin
COPY --from=build /app/dist ./dist

# The blob directory is the one place the services write (a shared volume in compose/k8s).
# Created here, owned by the non-root user, so a fresh named volume inherits the ownership.
RUN mkdir -p /var/lib/deepq/blobs && chown -R 1000:1000 /var/lib/deepq

# The `node` user of the official image (uid/gid 1000); numeric so Kubernetes can verify
# runAsNonRoot.
USER 1000:1000

EXPOSE 9464
# /healthz on METRICS_PORT (the image has no curl: node's fetch does the probe).
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.METRICS_PORT||9464)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

# tini is PID 1: it reaps the processes re-parented to it (what a killed sandbox run or an MCP
# server leaves behind), which node never does: as PID 1 they stayed zombies, counting against
# the next runs' process limit. It passes SIGTERM on to node, whose services drain
# (DEEPQ_DRAIN_TIMEOUT_MS) and exit 0, and exits with node's code. -s: still the reaper when
# something else is PID 1 (docker run --init, a shared pod process namespace).
ENTRYPOINT ["tini", "-s", "--", "node", "bin/deepq.mjs"]
CMD ["--help"]
