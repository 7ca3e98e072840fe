import Router from '@koa/router';
import type { Server } from 'node:http';
import Koa, { type Context } from 'koa';
import { ValidationError } from '../lib/platform/errors';
import { bracketedNameErrors, coerceFlat, contentErrors, toFieldErrors, validatorFor, type FieldError } from '../schemas/validator';
import type { AppDeps } from './deps';
import { createAuthenticator, sameUser, type Authenticator, type UserScopedPrincipal } from './middleware/auth';
import { readJsonBody } from './middleware/body';
import { errorRenderer, errorSummary } from './middleware/errors';
import { requestContext } from './middleware/request-context';
import type { AnyRoute } from './route';
import { routeTable } from './routes';

/** How a response stream fails when its client is gone. */
const CLIENT_GONE = new Set(['ERR_STREAM_PREMATURE_CLOSE', 'ECONNRESET', 'EPIPE']);

/**
 * Serves the app on `port`: idle connections are kept API_KEEP_ALIVE_TIMEOUT_MS (Node's default is 5 s: a client or
 * proxy that reuses a connection as the server closes it gets a reset, a 502 behind a load balancer), and a request's
 * headers may take a second longer (Node requires headersTimeout above keepAliveTimeout).
 */
export function listenApi(deps: AppDeps, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createApp(deps).listen({ port, host, reusePort: deps.config.API_REUSE_PORT }, () => {
      server.off('error', reject);
      resolve(server);
    });
    // A port another process holds (without API_REUSE_PORT on both) fails the start with EADDRINUSE.
    server.once('error', reject);
    server.keepAliveTimeout = deps.config.API_KEEP_ALIVE_TIMEOUT_MS;
    server.headersTimeout = deps.config.API_KEEP_ALIVE_TIMEOUT_MS + 1000;
    // A request may stream for an hour (Node's default cuts it at 5 minutes): an Apple Health export is gigabytes
    // from a phone's link. A longer upload is cut and resumes from its last stored byte (PATCH, upload-offset).
    server.requestTimeout = 3_600_000;
  });
}

/** Builds the Koa app without listening (api/main.ts listens; tests use it directly). */
export function createApp(deps: AppDeps): Koa {
  const app = new Koa();
  app.proxy = true;
  const router = new Router();
  const authenticate = createAuthenticator(deps);

  for (const route of routeTable(deps)) {
    const path = koaPath(route.path);
    // A request runs the route only if the route is the resource its path names (see `resourceOf`).
    router[route.method](path, (ctx, next) => (resourceOf(ctx).some((l) => l.path === path) ? runRoute(route, ctx, deps, authenticate) : next()));
  }

  // What Koa reports after a reply has started: a streamed body cut off by a failure (the socket is destroyed,
  // api/json-stream.ts) or by a client that went away. One log line each, instead of Koa's stack on stderr.
  app.on('error', (err: Error & { code?: string }, ctx?: Context) => {
    const log = ctx?.state.log ?? deps.logger;
    if (CLIENT_GONE.has(err.code ?? '')) log.info({ path: ctx?.path, code: err.code }, 'client closed the connection before the response ended');
    else log.error({ err: errorSummary(err), path: ctx?.path }, 'response cut off after it started');
  });
  app.use(requestContext(deps.logger));
  app.use(errorRenderer());
  app.use(allowedMethods());
  app.use(router.routes());
  return app;
}

type MatchedLayer = { path: string; methods: string[] };

/**
 * The routes of the resource a request path names: of the route paths that match it, those with the most
 * literal segments. `/webhook/events` matches both `/webhook/events` and `/webhook/{webhook_id}`; it names
 * the first, so `PATCH /webhook/events` is a 405 (GET only), not a PATCH of a webhook called "events".
 */
function resourceOf(ctx: Context): MatchedLayer[] {
  const layers = ((ctx as { matched?: MatchedLayer[] }).matched ?? []).filter((l) => l.methods.length > 0);
  const literals = (l: MatchedLayer) => l.path.split('/').filter((s) => s && !s.startsWith(':')).length;
  const most = Math.max(...layers.map(literals));
  return layers.filter((l) => literals(l) === most);
}

/**
 * OPTIONS answers 204 with `Allow`; any other method the resource does not implement (including TRACE
 * and methods no route uses) is a 405 with `Allow`. A path no route matches stays a 404.
 */
function allowedMethods() {
  return async (ctx: Context, next: () => Promise<unknown>) => {
    await next();
    if (ctx.status !== 404 || ctx.body !== undefined) return;
    const resource = resourceOf(ctx);
    if (!resource.length) return;
    ctx.set('Allow', [...new Set(resource.flatMap((l) => l.methods))].join(', '));
    ctx.status = ctx.method === 'OPTIONS' ? 204 : 405;
  };
}

/** `/v2/user/{user_id}/` → `/v2/user/:user_id` (a trailing slash stays optional). */
export const koaPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1').replace(/(.)\/$/, '$1');

function validatePart(location: string, schema: AnyRoute['params'], raw: Record<string, unknown>, errors: FieldError[]) {
  if (!schema) return {};
  const value = location === 'body' ? raw : coerceFlat(schema, raw);
  if (location !== 'body') errors.push(...bracketedNameErrors(location, schema, raw));
  const validate = validatorFor(schema);
  if (!validate(value)) errors.push(...toFieldErrors(location, validate.errors));
  errors.push(...contentErrors(location, value));
  return value;
}

async function runRoute(route: AnyRoute, ctx: Context, deps: AppDeps, authenticate: Authenticator) {
  ctx.state.route = route.path;
  const errors: FieldError[] = [];
  let auth: unknown;
  if (route.auth === 'team') auth = await authenticate.team(ctx);
  if (route.auth === 'link') auth = await authenticate.link(ctx);

  const params = validatePart('path', route.params, { ...ctx.params }, errors);
  if (route.auth === 'user') auth = await authenticate.user(ctx);
  if (route.auth === 'management') {
    // The key is checked before validation messages so an anonymous caller learns nothing about the API.
    const p = params as { org_id?: string; team_id?: string };
    const validIds = errors.length === 0;
    auth = await authenticate.management(ctx, validIds ? p.org_id : undefined, validIds ? p.team_id : undefined);
  }
  const query = validatePart('query', route.query, { ...ctx.query }, errors);
  let body: unknown;
  if (route.body) {
    const raw = await readJsonBody(ctx, deps.config.BODY_LIMIT_BYTES);
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
      errors.push({ loc: ['body'], msg: 'Input should be a JSON object', type: 'dict_type' });
    } else {
      body = validatePart('body', route.body, raw as Record<string, unknown>, errors);
    }
  }
  if (errors.length) throw new ValidationError(errors);
  if (route.auth === 'user') {
    sameUser(auth as UserScopedPrincipal, (params as { user_id?: string }).user_id ?? (body as { user_id?: string } | undefined)?.user_id);
  }

  const reply = await route.handler({
    params,
    query,
    body,
    auth: auth as never,
    deps,
    log: ctx.state.log,
    requestId: ctx.state.requestId,
    ctx,
  });
  for (const [name, value] of Object.entries(reply.headers ?? {})) ctx.set(name, value);
  ctx.status = reply.status ?? 200;
  if (reply.body !== undefined) {
    if (reply.contentType) ctx.type = reply.contentType;
    ctx.body = reply.body;
  }
}
