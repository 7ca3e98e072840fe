import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Logger } from '../../lib/platform/logger';
import { httpRequestDuration, httpRequests } from '../../lib/platform/metrics';

declare module 'koa' {
  interface DefaultState {
    requestId: string;
    log: Logger;
    teamId?: string;
    /** The route template that ran (metrics label); unset when no route matched. */
    route?: string;
  }
}

const ACCEPTABLE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Request id (accepted from `x-request-id` or generated, always echoed), one log line and the metrics of each request. */
export function requestContext(logger: Logger) {
  return async (ctx: Context, next: Next) => {
    const started = process.hrtime.bigint();
    const incoming = ctx.get('x-request-id');
    const requestId = ACCEPTABLE_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.state.log = logger.child({ req_id: requestId });
    ctx.set('x-request-id', requestId);
    const record = (complete: boolean) => {
      const latencyMs = Number(process.hrtime.bigint() - started) / 1e6;
      const labels = { method: ctx.method, route: ctx.state.route ?? 'unmatched', status: String(ctx.status) };
      httpRequests.inc(labels);
      httpRequestDuration.observe(labels, latencyMs / 1000);
      ctx.state.log.info(
        {
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          latency_ms: Math.round(latencyMs * 100) / 100,
          team_id: ctx.state.teamId,
          ...(complete ? {} : { complete: false }),
        },
        'request',
      );
    };
    try {
      await next();
    } finally {
      const body = ctx.body as { pipe?: unknown } | null | undefined;
      // A streamed body (a large timeseries read) is timed and logged once its last byte is written, or when the
      // connection closes before that (`complete: false`).
      if (body && typeof body.pipe === 'function' && !ctx.res.writableFinished) ctx.res.once('close', () => record(ctx.res.writableFinished));
      else record(true);
    }
  };
}
