// Baseline A of `npm run bench`: the plain Koa 3 + @koa/router stack (the same CommonJS builds the API
// loads) with one constant JSON route (GET, and POST for the machine's reference), in its own process so it never shares an event loop with the
// load generator. Started with fork(): reports { port } over IPC, exits on SIGTERM/SIGINT or when the
// parent goes away.
import { createRequire } from 'node:module';
import { serveForParent } from './child-server.mjs';

const require = createRequire(import.meta.url);
const koaModule = require('koa');
const routerModule = require('@koa/router');
const Koa = koaModule.default ?? koaModule;
const Router = routerModule.default ?? routerModule;

const app = new Koa();
app.proxy = true;
const router = new Router();
const CONSTANT = { status: 'ok', service: 'healthbridge-bench', version: 1 };
router.get('/constant', (ctx) => {
  ctx.body = CONSTANT;
});
// The machine's reference (bench.mjs): a POST whose small JSON body is read and answered with the constant.
router.post('/constant', async (ctx) => {
  for await (const chunk of ctx.req) void chunk;
  ctx.body = CONSTANT;
});
app.use(router.routes());
app.use(router.allowedMethods());

serveForParent(app.listen(0, '127.0.0.1'));
