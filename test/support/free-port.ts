import net from 'node:net';

/** A TCP port free on 127.0.0.1 right now, for a process a test starts (it listens there next). */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}
