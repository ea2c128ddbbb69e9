import { execFile } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** PEM files of a test CA, a server certificate for 127.0.0.1/localhost, and client certificates. */
export interface TestCertificates {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  /** A docker client cert directory (ca.pem, cert.pem, key.pem), as DOCKER_CERT_PATH wants it. */
  clientDir: string;
  /** A client certificate signed by another CA: the server must refuse it. */
  rogueDir: string;
  /** Only the CA (ca.pem): a client that has no certificate of its own. */
  noCertDir: string;
}

async function openssl(args: string[]): Promise<void> {
  await run('openssl', args, { timeout: 30_000 });
}

async function makeCa(dir: string, name: string): Promise<{ cert: string; key: string }> {
  const key = join(dir, `${name}-key.pem`);
  const cert = join(dir, `${name}.pem`);
  await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  await openssl(['req', '-x509', '-new', '-key', key, '-days', '2', '-subj', `/CN=${name}`, '-out', cert]);
  return { cert, key };
}

async function signed(
  dir: string,
  name: string,
  ca: { cert: string; key: string },
  ext: string,
): Promise<{ cert: string; key: string }> {
  const key = join(dir, `${name}-key.pem`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.pem`);
  const extFile = join(dir, `${name}.ext`);
  await writeFile(extFile, `${ext}\n`);
  await openssl(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  await openssl(['req', '-new', '-key', key, '-subj', `/CN=${name}`, '-out', csr]);
  await openssl([
    'x509',
    '-req',
    '-in',
    csr,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    extFile,
    '-out',
    cert,
  ]);
  return { cert, key };
}

/** Make a CA, a server certificate and client certificates under `dir` with openssl (ECDSA P-256, 2 days). */
export async function makeTestCertificates(dir: string): Promise<TestCertificates> {
  await mkdir(dir, { recursive: true });
  const ca = await makeCa(dir, 'ca');
  const server = await signed(
    dir,
    'server',
    ca,
    'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth',
  );
  const client = await signed(dir, 'client', ca, 'extendedKeyUsage=clientAuth');
  const other = await makeCa(dir, 'other-ca');
  const rogue = await signed(dir, 'rogue', other, 'extendedKeyUsage=clientAuth');
  const clientDir = join(dir, 'client');
  const rogueDir = join(dir, 'rogue');
  const noCertDir = join(dir, 'nocert');
  const caPem = await readFile(ca.cert);
  for (const [d, pair] of [
    [clientDir, client],
    [rogueDir, rogue],
  ] as const) {
    await mkdir(d, { recursive: true });
    await writeFile(join(d, 'ca.pem'), caPem);
    await writeFile(join(d, 'cert.pem'), await readFile(pair.cert));
    await writeFile(join(d, 'key.pem'), await readFile(pair.key));
  }
  await mkdir(noCertDir, { recursive: true });
  await writeFile(join(noCertDir, 'ca.pem'), caPem);
  return { dir, ca: ca.cert, serverCert: server.cert, serverKey: server.key, clientDir, rogueDir, noCertDir };
}
