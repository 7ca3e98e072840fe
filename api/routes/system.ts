import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import { ApiError, notFound } from '../../lib/platform/errors';
import { bearerMatches, metricsText } from '../../lib/platform/metrics';
import { pingMongo } from '../../lib/platform/database/mongo';
import { WORKER_HEARTBEAT_STALE_MS } from '../../lib/platform/worker-heartbeats-store';
import { searchAttributesRegistered, temporalReadiness } from '../../lib/platform/temporal';
import { SEARCH_ATTRIBUTES } from '../../lib/labs/order-workflow-terms';

import { ErrorDetail } from '../../schemas/common';
import { defineRoute, type AnyRoute } from '../route';
import { buildOpenApi } from '../openapi';

const tags = ['System'];
const READY_CHECK_MS = 1_000;
/** `promise`, or `fallback` if it has not settled within READY_CHECK_MS. */
function within<T>(promise: Promise<T>, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<T>((resolve) => (timer = setTimeout(() => resolve(fallback), READY_CHECK_MS)));
  return Promise.race([promise.catch(() => fallback), late]).finally(() => clearTimeout(timer));
}
/** The custom search attributes lab order workflows set: /ready fails until the namespace has them. */
const WORKFLOW_SEARCH_ATTRIBUTES = Object.values(SEARCH_ATTRIBUTES).map((k) => k.name);
const Health = Type.Object({ status: Type.String() }, { $id: 'Health' });
const Readiness = Type.Object(
  {
    status: Type.String(),
    checks: Type.Object({ mongodb: Type.Boolean(), temporal: Type.Boolean(), worker: Type.Boolean(), search_attributes: Type.Boolean() }),
  },
  { $id: 'Readiness' },
);

// The docs page renders /openapi.json with swagger-ui-dist served from node_modules (no CDN).
const swaggerDir = (() => {
  try {
    return path.dirname(require.resolve('swagger-ui-dist/package.json'));
  } catch {
    return null;
  }
})();
const DOC_ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css',
  'swagger-ui-bundle.js': 'application/javascript',
  'swagger-ui-standalone-preset.js': 'application/javascript',
};
const DOCS_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Healthbridge API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/init.js"></script></body></html>`;
const DOCS_INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true });`;

export function systemRoutes(allRoutes: () => AnyRoute[]) {
  let openapi: unknown;
  return [
    defineRoute({
      operationId: 'health',
      method: 'get',
      path: '/health',
      summary: 'Liveness',
      tags,
      auth: 'none',
      responses: { 200: { description: 'The process is up', schema: Health } },
      handler: () => ({ body: { status: 'ok' } }),
    }),
    defineRoute({
      operationId: 'ready',
      method: 'get',
      path: '/ready',
      summary: 'Readiness',
      description:
        'MongoDB answers, Temporal answers, a worker polls the task queue and has recorded a heartbeat in the last 15 s ' +
        '(Temporal alone keeps listing a killed worker for minutes), and the namespace has the search attributes lab order ' +
        'workflows set (README "Production with docker compose" registers them). Each check that has not answered within 1 s counts as failed.',
      tags,
      auth: 'none',
      responses: {
        200: { description: 'Ready', schema: Readiness },
        503: { description: 'Not ready', schema: Readiness },
      },
      async handler({ deps }) {
        // Each check answers within READY_CHECK_MS (a dependency that is down would otherwise hold the answer for its
        // client's whole timeout); one that has not answered by then counts as failed.
        const [mongodb, temporal, heartbeat, searchAttributes] = await Promise.all([
          within(pingMongo(deps.db), false),
          within(temporalReadiness(deps.temporal), { server: false, worker: false }),
          within(
            deps.repos.workers.anyAliveSince(deps.temporal.taskQueue, new Date(Date.now() - WORKER_HEARTBEAT_STALE_MS)).catch(() => false),
            false,
          ),
          within(searchAttributesRegistered(deps.temporal, WORKFLOW_SEARCH_ATTRIBUTES), false),
        ]);
        const checks = { mongodb, temporal: temporal.server, worker: temporal.worker && heartbeat, search_attributes: searchAttributes };
        const ready = checks.mongodb && checks.temporal && checks.worker && checks.search_attributes;
        return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'not_ready', checks } };
      },
    }),
    defineRoute({
      operationId: 'metrics',
      method: 'get',
      path: '/metrics',
      summary: 'Prometheus metrics of this api process',
      description:
        'The Prometheus text format: requests by route template and status, database and Temporal call latency, workflow starts by ' +
        'type, and Node process metrics (the worker serves its own on WORKER_METRICS_PORT). With METRICS_TOKEN set, a scrape must send ' +
        '`Authorization: Bearer <token>`. Labels never carry ids, keys or personal data.',
      tags,
      auth: 'none',
      responses: {
        200: { description: 'Metrics', contentType: 'text/plain' },
        401: { description: 'METRICS_TOKEN is set and was not sent', schema: ErrorDetail },
      },
      async handler({ deps, ctx }) {
        const token = deps.config.METRICS_TOKEN;
        if (token && !bearerMatches(ctx.get('authorization'), token)) {
          throw new ApiError(401, 'This endpoint needs `Authorization: Bearer <METRICS_TOKEN>`.', { 'WWW-Authenticate': 'Bearer' });
        }
        const { body, contentType } = await metricsText();
        return { body, contentType };
      },
    }),
    defineRoute({
      operationId: 'openapi',
      method: 'get',
      path: '/openapi.json',
      summary: 'OpenAPI 3.1 document',
      tags,
      auth: 'none',
      responses: { 200: { description: 'This API, described' } },
      handler: ({ deps }) => {
        openapi ??= buildOpenApi(allRoutes(), deps.config);
        return { body: openapi };
      },
    }),
    defineRoute({
      operationId: 'docs',
      method: 'get',
      path: '/docs',
      summary: 'API documentation page',
      tags,
      auth: 'none',
      internal: true,
      responses: { 200: { description: 'HTML', contentType: 'text/html' } },
      handler: () => ({ body: DOCS_HTML, contentType: 'text/html' }),
    }),
    defineRoute({
      operationId: 'docsAsset',
      method: 'get',
      path: '/docs/assets/{file}',
      summary: 'Docs page assets',
      tags,
      auth: 'none',
      internal: true,
      params: Type.Object({ file: Type.String() }),
      responses: { 200: { description: 'Asset' }, 404: { description: 'Unknown asset', schema: ErrorDetail } },
      handler: ({ params }) => {
        if (params.file === 'init.js') return { body: DOCS_INIT, contentType: 'application/javascript' };
        const type = DOC_ASSETS[params.file];
        if (!type || !swaggerDir) throw notFound(`Unknown docs asset '${params.file}'.`);
        return {
          body: readFileSync(path.join(swaggerDir, params.file)),
          contentType: type,
          headers: { 'Cache-Control': 'public, max-age=3600' },
        };
      },
    }),
  ];
}
