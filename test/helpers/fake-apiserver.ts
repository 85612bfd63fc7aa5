// A stand-in for the Kubernetes API server, for the SIGTERM decision only: HTTPS on 127.0.0.1
// with a CA and server certificate generated per test (openssl), a service-account token file,
// and the one route the daemon asks: GET /apis/apps/v1/namespaces/NS/daemonsets/NAME.
// It answers as the real API server does: the object (with or without metadata.deletionTimestamp),
// or a 404 Status; 401 without the bearer token.

import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

/** 'proxy-404': a 404 that is not the API server's (a plain-text body, as a proxy in front of it answers a path it does not serve). */
export type DaemonSetAnswer = 'present' | 'absent' | 'deleting' | 'proxy-404';

export class FakeApiServer {
  readonly caFile: string;
  readonly tokenFile: string;
  readonly token = 'test-token-0123456789';
  answer: DaemonSetAnswer = 'present';
  readonly requests: Array<{ path: string; authorized: boolean }> = [];
  private server: Server | undefined;
  private port = 0;
  /**
   * Where the API is served under, as behind a proxy that serves several clusters (Rancher's
   * /k8s/clusters/<id>): every other path is that proxy's plain-text 404.
   */
  pathPrefix = '';

  constructor(
    private readonly dir: string,
    readonly namespace: string,
    readonly name: string,
  ) {
    this.caFile = join(dir, 'ca.crt');
    this.tokenFile = join(dir, 'token');
    const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
    ssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=stand-in test CA',
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
    );
    ssl(
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      '/CN=127.0.0.1',
      '-keyout',
      'server.key',
      '-out',
      'server.csr',
    );
    writeFileSync(join(dir, 'san.ext'), 'subjectAltName=IP:127.0.0.1\n');
    ssl(
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      'san.ext',
      '-out',
      'server.crt',
    );
    writeFileSync(this.tokenFile, `${this.token}\n`);
  }

  get url(): string {
    return `https://127.0.0.1:${this.port}${this.pathPrefix}`;
  }

  async start(): Promise<void> {
    const server = createServer(
      { key: readFileSync(join(this.dir, 'server.key')), cert: readFileSync(join(this.dir, 'server.crt')) },
      (req, res) => {
        const authorized = req.headers.authorization === `Bearer ${this.token}`;
        this.requests.push({ path: req.url ?? '', authorized });
        const send = (code: number, body: unknown) => {
          res.writeHead(code, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        };
        if (!(req.url ?? '').startsWith(this.pathPrefix) || this.answer === 'proxy-404') {
          res.writeHead(404, { 'content-type': 'text/plain' });
          return res.end('404 page not found\n');
        }
        const path = (req.url ?? '').slice(this.pathPrefix.length);
        if (!authorized)
          return send(401, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Unauthorized', code: 401 });
        if (req.method !== 'GET' || path !== `/apis/apps/v1/namespaces/${this.namespace}/daemonsets/${this.name}`) {
          return send(404, { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 });
        }
        if (this.answer === 'absent') {
          return send(404, {
            kind: 'Status',
            apiVersion: 'v1',
            status: 'Failure',
            reason: 'NotFound',
            code: 404,
            message: `daemonsets.apps "${this.name}" not found`,
            details: { name: this.name, group: 'apps', kind: 'daemonsets' },
          });
        }
        const metadata: Record<string, unknown> = {
          name: this.name,
          namespace: this.namespace,
          uid: 'f00',
          generation: 2,
        };
        if (this.answer === 'deleting') {
          metadata.deletionTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
          metadata.deletionGracePeriodSeconds = 0;
        }
        send(200, { kind: 'DaemonSet', apiVersion: 'apps/v1', metadata, spec: {}, status: {} });
      },
    );
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (s)
      await new Promise<void>((r) => {
        s.close(() => r());
        s.closeAllConnections();
      });
  }

  /** Daemon flags that point it at this server as if in-cluster. */
  daemonArgs(): string[] {
    return [
      '--k8s-api',
      this.url,
      '--k8s-token-file',
      this.tokenFile,
      '--k8s-ca-file',
      this.caFile,
      '--namespace',
      this.namespace,
      '--daemonset',
      this.name,
    ];
  }
}
