# syntax=docker/dockerfile:1
#
# One image for both processes:
#   api     node dist/api/main.js      (default CMD)
#   worker  node --single-threaded-gc dist/worker/main.js
# Configuration comes only from the environment (lib/platform/config.ts); see docker-compose.yml and README.md.
#
# Debian (glibc) base, not Alpine: the Temporal SDK's native bridge and @swc/core (used by the worker to
# bundle workflow code at start-up) ship prebuilt glibc binaries.
#
# Install scripts are skipped (--ignore-scripts), as in development: no dependency needs one to work
# (the native modules are prebuilt packages), and it keeps third-party postinstall code out of the build.

# Node.js 24 LTS, as package.json `engines` asks (Node 20 reached its end of life on 2026-04-30).
ARG NODE_IMAGE=node:24-bookworm-slim

# ---- build: all dependencies, compile TypeScript to dist/ -------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# `npm install` from the lock rather than `npm ci`: see scripts/setup.mjs (npm 11 lock files omit other
# platforms' optional packages, which `npm ci` then rejects).
RUN npm install --ignore-scripts --no-audit --no-fund
COPY . .
# tsc also copies the imported catalogue JSON (lib/catalogue/*.json) into dist/lib/catalogue/; the static files of the
# delivery-log page (api/console/) and the hosted link page (api/link/) are copied beside the compiled api.
RUN npx tsc -p tsconfig.json \
 && rm -rf dist/test \
 && cp -r api/console dist/api/console && cp -r api/link dist/api/link \
 && test -f dist/api/main.js && test -f dist/worker/main.js && test -f dist/lib/catalogue/providers.json && test -f dist/api/console/index.html && test -f dist/api/link/index.html

# ---- prod-deps: production dependencies only ---------------------------------------------------------
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm install --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# ---- runtime -----------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    API_HOST=0.0.0.0 \
    API_PORT=8080
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# Code stays root-owned (read-only to the process); run as the unprivileged `node` user (uid 1000)
# that the official image provides.
USER node
EXPOSE 8080
# No image-level HEALTHCHECK: the same image runs the worker, which serves no HTTP. docker-compose.yml
# checks the api's GET /health.
CMD ["node", "dist/api/main.js"]
