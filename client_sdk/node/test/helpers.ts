// Shared pieces of the end-to-end tests: the sidecar binary, a handler
// recorder that checks the handlers' story, mirror-vs-sidecar comparison and
// a TCP proxy that can cut connections. Every wait polls a condition with a
// deadline; none sleeps for a fixed time.
import * as assert from 'assert';
import * as net from 'net';
import * as path from 'path';

import { InformerClient, KubeObject, RemoteInformer, objectKey } from '../src';

/** The sidecar binary: $INFORMER_SIDECAR_BIN, else the bazel-bin of this
 * checkout (build it with `bazel build //server:informer_sidecar`). */
export const BINARY = process.env.INFORMER_SIDECAR_BIN ||
  path.resolve(__dirname, '..', '..', '..', '..', 'bazel-bin', 'server', 'informer_sidecar');

/** The bound of every wait. */
export const TIMEOUT_MS = 60_000;

export type Call = { kind: 'add' | 'update' | 'delete'; key: string; flag: boolean | null;
  rv: string; token: string };

/** Records handler calls and checks they tell a consistent story: an add
 * only for a key the handlers do not have, an update or delete only for one
 * they have, an update's old object the last one seen (so a duplicate add
 * fails the test). */
export class Recorder {
  readonly model = new Map<string, KubeObject>();
  readonly calls: Call[] = [];
  readonly errors: string[] = [];

  constructor(readonly informer: RemoteInformer) {
    informer.on('add', (obj, isInitial) => {
      const key = objectKey(obj);
      if (this.model.has(key)) this.errors.push(`duplicate add of ${key}`);
      this.model.set(key, obj);
      this.record('add', obj, isInitial);
    });
    informer.on('update', (oldObj, newObj) => {
      const key = objectKey(newObj);
      if (!this.model.has(key)) this.errors.push(`update of unknown ${key}`);
      else if (this.model.get(key) !== oldObj) this.errors.push(`update of ${key}: old is not the last seen`);
      this.model.set(key, newObj);
      this.record('update', newObj, null);
    });
    informer.on('delete', (obj, tombstone) => {
      const key = objectKey(obj);
      if (!this.model.has(key)) this.errors.push(`delete of unknown ${key}`);
      this.model.delete(key);
      this.record('delete', obj, tombstone);
    });
  }

  private record(kind: Call['kind'], obj: KubeObject, flag: boolean | null): void {
    this.calls.push({ kind, key: objectKey(obj), flag, rv: rv(obj),
      token: this.informer.resumeToken });
  }

  /** The model equals the informer's mirror (same objects). */
  assertModelIsMirror(): void {
    assert.deepStrictEqual(this.errors, []);
    assert.deepStrictEqual([...this.model.keys()].sort(), this.informer.keys());
    for (const obj of this.informer.list()) assert.strictEqual(this.model.get(objectKey(obj)), obj);
  }
}

export function rv(obj: KubeObject): string {
  return obj?.metadata?.resourceVersion ?? '';
}

/** {key: resourceVersion} of objects, as a sorted JSON string. */
export function rvs(objs: KubeObject[]): string {
  return JSON.stringify(objs.map((o) => [objectKey(o), rv(o)]).sort());
}

/** Waits until the mirror equals what InformerClient.list of the same
 * resource (and filters) says; the demo changes objects every second, so
 * the comparison is retried on every mirror change. */
export async function waitMirrorMatches(informer: RemoteInformer, client: InformerClient,
  resource: string, filter: { namespace?: string; labelSelector?: string } = {}): Promise<void> {
  const deadline = Date.now() + TIMEOUT_MS;
  let want = '';
  while (Date.now() < deadline) {
    want = rvs(await client.list(resource, filter));
    if (await informer.waitFor((inf) => rvs(inf.list()) === want, 2000)) return;
  }
  assert.fail(`mirror never matched the sidecar: ${rvs(informer.list())} vs ${want}`);
}

/**
 * A TCP proxy on 127.0.0.1:0 to a backend port: cut() destroys every open
 * connection (a network failure as the client sees it), retarget() sends
 * new connections to another backend (a sidecar restarted on a new port).
 */
export class TcpProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  /** Connections accepted so far. */
  accepted = 0;
  port = 0;

  constructor(private backendPort: number) {
    this.server = net.createServer((client) => {
      this.accepted++;
      const upstream = net.connect(this.backendPort, '127.0.0.1');
      for (const [a, b] of [[client, upstream], [upstream, client]]) {
        this.sockets.add(a);
        a.on('error', () => b.destroy());
        a.on('close', () => {
          this.sockets.delete(a);
          b.destroy();
        });
        a.pipe(b);
      }
    });
  }

  listen(): Promise<this> {
    return new Promise((resolve) => {
      this.server.listen(0, '127.0.0.1', () => {
        this.port = (this.server.address() as net.AddressInfo).port;
        resolve(this);
      });
    });
  }

  get target(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Number of connections open now. */
  get open(): number {
    return this.sockets.size / 2;
  }

  cut(): void {
    for (const s of this.sockets) s.destroy();
  }

  retarget(port: number): void {
    this.backendPort = port;
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** A console.warn spy: collects the lines logged while installed. */
export function spyConsoleWarn(): { lines: string[]; restore: () => void } {
  const original = console.warn;
  const lines: string[] = [];
  console.warn = (...args: unknown[]) => {
    lines.push(args.map(String).join(' '));
  };
  return { lines, restore: () => { console.warn = original; } };
}
