// Baseline A of `npm run bench`: the plain Koa 3 + @koa/router stack (the same CommonJS builds the API
// loads) with one constant JSON route, in its own process so it never shares an event loop with the
// load generator. Started with fork(): reports { port } over IPC, exits on SIGTERM/SIGINT or when the
// parent goes away.
import { createRequire } from 'node:module';

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
app.use(router.routes());
app.use(router.allowedMethods());

const server = app.listen(0, '127.0.0.1', () => {
  process.send?.({ port: server.address().port });
});

const stop = () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.once('disconnect', stop);
