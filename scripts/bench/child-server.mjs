// Shared by the bench's child servers (constant route, webhook receiver): report the port to the parent,
// and stop cleanly when told to or when the parent goes away.
export function serveForParent(server) {
  server.once('listening', () => process.send?.({ port: server.address().port }));
  const stop = () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
    setTimeout(() => process.exit(0), 2000).unref();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.once('disconnect', stop);
}
