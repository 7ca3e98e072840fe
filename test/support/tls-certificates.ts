import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

/** A certificate and its key, PEM, with the fingerprint an MllpPeer reports for it ('sha256:<lowercase hex>'). */
export interface TestCertificate {
  cert: string;
  key: string;
  fingerprint256: string;
}

export interface TestAuthority {
  /** The CA's certificate (PEM): what a client trusts, or what a server checks client certificates against. */
  ca: string;
  /** A server certificate for 127.0.0.1 and localhost. */
  server: TestCertificate;
  /** A client certificate this CA signed. */
  client: TestCertificate;
}

const fingerprintOf = (pem: string) => `sha256:${new X509Certificate(pem).fingerprint256.replace(/:/g, '').toLowerCase()}`;

/**
 * A throwaway certificate authority with a server and a client certificate, made by `openssl` in a temporary
 * folder that is removed before this returns (no key is ever committed).
 */
export function makeTestAuthority(name = 'Healthbridge test CA'): TestAuthority {
  const dir = mkdtempSync(path.join(tmpdir(), 'hb-tls-'));
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const file = (f: string) => readFileSync(path.join(dir, f), 'utf8');
  try {
    openssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      'ca.key',
      '-out',
      'ca.pem',
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
    );
    const issue = (leaf: string, subject: string, extensions: string) => {
      writeFileSync(path.join(dir, `${leaf}.ext`), extensions);
      openssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${leaf}.key`, '-out', `${leaf}.csr`, '-subj', subject);
      openssl(
        'x509',
        '-req',
        '-in',
        `${leaf}.csr`,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-out',
        `${leaf}.pem`,
        '-days',
        '2',
        '-extfile',
        `${leaf}.ext`,
      );
      return { cert: file(`${leaf}.pem`), key: file(`${leaf}.key`), fingerprint256: fingerprintOf(file(`${leaf}.pem`)) };
    };
    const server = issue('server', '/CN=localhost', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
    const client = issue('client', '/CN=Test laboratory', 'extendedKeyUsage=clientAuth\n');
    return { ca: file('ca.pem'), server, client };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
