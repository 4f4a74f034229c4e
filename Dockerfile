# syntax=docker/dockerfile:1
# study-helper as a container (docs/operations.md "Deploy"). Two stages: the build stage installs everything
# and compiles; the runtime stage holds only the packed package (the files `npm pack` ships: dist/ with the
# web page and the machine drawings, package.json) and the production dependencies, run as a non-root user.

FROM node:24-slim AS build
WORKDIR /build
COPY . .
# `npm ci` runs `prepare`, which builds dist/ (TypeScript is a devDependency: it stays in this stage).
RUN npm ci --no-audit --no-fund
# The package exactly as `npm pack` ships it, unpacked into /package.
RUN npm pack --ignore-scripts --pack-destination /tmp \
  && mkdir /package \
  && tar -xzf /tmp/study-helper-*.tgz -C /package --strip-components=1 \
  && cp package-lock.json /package/

FROM node:24-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000 \
    JOBS_DIR=/var/lib/study-helper
WORKDIR /app
COPY --from=build /package ./
# Production dependencies only, from the lockfile; no install scripts (the build stage already built dist/).
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
# Job records and uploaded documents (without REDIS_URL) live here, so jobs survive a restart of the
# container as `interrupted`; the service takes only a directory its own user owns and no one else may write.
RUN mkdir -p /var/lib/study-helper && chown node:node /var/lib/study-helper && chmod 700 /var/lib/study-helper
VOLUME ["/var/lib/study-helper"]
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# Node's young generation bounded as on Node 20: Node 24 grows it to two 64 MiB semi-spaces under load and keeps
# the pages (docs/operations.md "Memory"); package.json's start and demo scripts pass the same flag.
CMD ["node", "--max-semi-space-size=16", "dist/src/main.js"]
