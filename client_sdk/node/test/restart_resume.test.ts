// RemoteInformer's mirror across restarts of the real sidecar binary (with
// --cache_dir) in front of the API server emulator ($INFORMER_EMULATOR_BIN,
// real HTTP between them): on a fixed Unix socket the informer reconnects to
// the restarted sidecar and resumes with its last token. Orderly restarts
// under churn give no RESET, no missed and no repeated event, also when the
// catching up is a relist (the API server's window passed); a token older
// than the persisted history, or one a SIGKILLed run issued after its last
// snapshot, gets RESET and the mirror converges all the same. Every wait
// polls a condition with a deadline.
import * as assert from 'assert';
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as http from 'http';
import * as os from 'os';
import * as path from 'path';
import * as readline from 'readline';
import * as grpc from '@grpc/grpc-js';
import { afterEach, beforeEach, describe, it } from 'node:test';

import { KubeObject, RemoteInformer, objectKey, pollUntil } from '../src';
import { informerV1 } from '../src/proto';
import { BINARY } from './helpers';

/** The emulator binary: $INFORMER_EMULATOR_BIN, else the bazel-bin of this
 * checkout (bazel build //emulator:kube_emulator). */
const EMULATOR = process.env.INFORMER_EMULATOR_BIN ||
  path.resolve(__dirname, '..', '..', '..', '..', 'bazel-bin', 'emulator', 'kube_emulator');
const OBJECTS = 300;
/** The bound of every wait: only reached when the test fails. */
const TIMEOUT_MS = 90_000;
const T = { timeout: 8 * TIMEOUT_MS };
const QUIET = { info() {}, warn() {} };

function rvOf(obj: KubeObject): number {
  return Number(obj?.metadata?.resourceVersion ?? 0);
}

/** Checks the handlers' story: an add only of a key not held, an update or
 * delete only of one held, every update newer than what was held (a
 * repeated event would go backwards or stand still). */
class Story {
  readonly held = new Map<string, number>();
  readonly errors: string[] = [];
  events = 0;

  constructor(informer: RemoteInformer) {
    informer.on('add', (obj) => {
      const key = objectKey(obj);
      if (this.held.has(key)) this.errors.push(`add of held ${key}`);
      this.held.set(key, rvOf(obj));
      this.events++;
    });
    informer.on('update', (_old, obj) => {
      const key = objectKey(obj);
      const had = this.held.get(key);
      if (had === undefined) this.errors.push(`update of absent ${key}`);
      else if (rvOf(obj) <= had) this.errors.push(`update of ${key} to ${rvOf(obj)} over ${had}`);
      this.held.set(key, rvOf(obj));
      this.events++;
    });
    informer.on('delete', (obj) => {
      const key = objectKey(obj);
      if (!this.held.delete(key)) this.errors.push(`delete of absent ${key}`);
      this.events++;
    });
  }
}

/** The emulator as a child process on a port it picks, and HTTP to it. */
class Emulator {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  private proc: ChildProcess | null = null;
  port = 0;

  async start(): Promise<this> {
    if (!fs.existsSync(EMULATOR)) {
      throw new Error(`no emulator at ${EMULATOR} (bazel build //emulator:kube_emulator, ` +
        'or set INFORMER_EMULATOR_BIN)');
    }
    const proc = spawn(EMULATOR, ['--port=0', `--seed_configmaps=${OBJECTS}`],
      { stdio: ['ignore', 'pipe', 'ignore'] });
    this.proc = proc;
    // It prints its port once serving.
    const lines = readline.createInterface({ input: proc.stdout! });
    const first = await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      proc.once('exit', (code) => reject(new Error(`emulator exited (${code})`)));
    });
    lines.close();
    this.port = Number(first);
    // A real cluster has it; the sidecar tells clusters apart by its uid.
    const ns = await this.request('POST', '/api/v1/namespaces',
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'kube-system' } });
    assert.ok(ns.status === 201 || ns.status === 409, ns.body);
    return this;
  }

  request(method: string, urlPath: string, body?: object,
    contentType = 'application/json'): Promise<{ status: number; body: string }> {
    const data = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1', port: this.port, path: urlPath, method, agent: this.agent,
        timeout: 30_000,
        headers: data === undefined ? {}
          : { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(data) },
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${urlPath}: timed out`)));
      req.on('error', reject);
      req.end(data);
    });
  }

  patch(name: string, data: Record<string, string>): Promise<{ status: number; body: string }> {
    return this.request('PATCH', `/api/v1/namespaces/benchcms/configmaps/${name}`, { data },
      'application/merge-patch+json');
  }

  /** The API server's objects: "namespace/name" -> resourceVersion. */
  async state(): Promise<Map<string, string>> {
    const res = await this.request('GET', '/_emulator/state?resource=configmaps');
    assert.strictEqual(res.status, 200, res.body);
    const objs = JSON.parse(res.body).objects as Array<{ key: string; resourceVersion: string }>;
    return new Map(objs.map((o) => [o.key, o.resourceVersion]));
  }

  async close(): Promise<void> {
    this.agent.destroy();
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    await exited;
  }
}

/** Patches the seeded ConfigMaps, and creates and deletes others, until
 * stopped. */
class Churn {
  done = 0;
  private stopped = false;
  private loop: Promise<void> | null = null;

  constructor(private readonly emu: Emulator) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
  }

  private async run(): Promise<void> {
    for (let n = 0; !this.stopped; n++) {
      await this.emu.patch(`cm-${String((n * 37) % OBJECTS).padStart(6, '0')}`, { churn: String(n) });
      if (n % 5 === 0) {
        await this.emu.request('POST', '/api/v1/namespaces/benchcms/configmaps',
          { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `churn-${n}` } });
        if (n >= 15) await this.emu.request('DELETE', `/api/v1/namespaces/benchcms/configmaps/churn-${n - 15}`);
      }
      this.done = n + 1;
      // Paces the load (about 200 changes a second, not a wait for a
      // condition): a faster churn outruns the 10000 events the history
      // keeps within a run, and a mirror's token inside a coalesced batch
      // (the position before it) may then fall out of it: a RESET, which
      // is right, but not what this churn means to test.
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

/** The sidecar on a fixed Unix socket, caching to one directory: every
 * run continues the one before (or the last snapshot, after a SIGKILL). */
class CachedSidecar {
  private proc: ChildProcess | null = null;
  private exit: Promise<number | null> = Promise.resolve(null);
  httpPort = 0;

  constructor(readonly dir: string, private readonly kubeconfig: string) {}

  get target(): string {
    return `unix:${path.join(this.dir, 's.sock')}`;
  }

  /** Starts a run logging to `log`; resolves once it serves gRPC. */
  async start(log: string, extra: string[] = []): Promise<void> {
    const portsFile = path.join(this.dir, 'ports');
    fs.rmSync(portsFile, { force: true });
    const fd = fs.openSync(path.join(this.dir, log), 'w');
    const proc = spawn(BINARY, [
      `--kubeconfig=${this.kubeconfig}`, '--resources=configmaps', `--grpc_listen=${this.target}`,
      '--http_listen=127.0.0.1:0', `--ports_file=${portsFile}`, '--print_events=false',
      `--cache_dir=${path.join(this.dir, 'cache')}`, '--cache_snapshot_interval=0', ...extra,
    ], { stdio: ['ignore', 'ignore', fd] });
    fs.closeSync(fd);
    this.proc = proc;
    let exited = false;
    this.exit = new Promise((resolve) => proc.once('exit', (code) => {
      exited = true;
      resolve(code);
    }));
    // The sidecar writes the file (atomically, by rename) once bound.
    await pollUntil(() => exited || fs.existsSync(portsFile), TIMEOUT_MS, `${log}: no ports file`);
    assert.ok(!exited, `sidecar exited: ${this.log(log)}`);
    const ports = Object.fromEntries(fs.readFileSync(portsFile, 'utf8').trim().split('\n')
      .map((l) => l.split('=')));
    this.httpPort = Number(ports.http);
    const client = new (informerV1().Informer)(this.target, grpc.credentials.createInsecure());
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + TIMEOUT_MS,
      (err?: Error) => {
        client.close();
        if (err) reject(new Error(`${log}: not serving: ${err.message}`));
        else resolve();
      }));
  }

  /** SIGTERM (the snapshot, with the history, is written at shutdown);
   * resolves with the exit code. */
  async terminate(): Promise<number | null> {
    this.proc?.kill('SIGTERM');
    this.proc = null;
    return this.exit;
  }

  /** SIGKILL: no snapshot of this run. */
  async kill(): Promise<void> {
    this.proc?.kill('SIGKILL');
    this.proc = null;
    await this.exit;
  }

  log(name: string): string {
    return fs.readFileSync(path.join(this.dir, name), 'utf8');
  }

  /** The sum of a metric's samples on /metrics. */
  async metric(name: string): Promise<number> {
    const body = await new Promise<string>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port: this.httpPort, path: '/metrics' }, (res) => {
        let text = '';
        res.on('data', (c) => { text += c; });
        res.on('end', () => resolve(text));
      }).on('error', reject);
    });
    return body.split('\n').filter((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  }
}

describe('RemoteInformer across restarts of a sidecar with --cache_dir', () => {
  let dir: string;
  let emu: Emulator;
  let sidecar: CachedSidecar;
  const informers: RemoteInformer[] = [];

  const newInformer = (resumeToken?: string): { informer: RemoteInformer; story: Story } => {
    const informer = new RemoteInformer('configmaps', {
      target: sidecar.target, resumeToken, initialBackoffMs: 50, maxBackoffMs: 1000, logger: QUIET,
    });
    informers.push(informer);
    return { informer, story: new Story(informer) };
  };

  /** Waits until the mirror equals the emulator's objects (keys and
   * resourceVersions); the churn must have stopped. */
  const expectConverged = async (informer: RemoteInformer): Promise<void> => {
    const want = JSON.stringify([...(await emu.state())].sort());
    const got = () => JSON.stringify(informer.list().map((o) => [objectKey(o), o.metadata.resourceVersion]));
    assert.ok(await informer.waitFor(() => got() === want, TIMEOUT_MS),
      `mirror holds ${informer.list().length} objects, the API server ${JSON.parse(want).length}`);
  };

  /** Waits until the story has `n` more events. */
  const moreEvents = async (informer: RemoteInformer, story: Story, n: number): Promise<void> => {
    const until = story.events + n;
    assert.ok(await informer.waitFor(() => story.events >= until, TIMEOUT_MS),
      `${story.events} events, waited for ${until}`);
  };

  beforeEach(async () => {
    // A Unix socket path must stay short: a directory under /tmp.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rrn'));
    emu = await new Emulator().start();
    const kubeconfig = path.join(dir, 'kubeconfig');
    fs.writeFileSync(kubeconfig, 'apiVersion: v1\nkind: Config\ncurrent-context: t\n' +
      `clusters:\n- name: t\n  cluster:\n    server: http://127.0.0.1:${emu.port}\n` +
      'contexts:\n- name: t\n  context:\n    cluster: t\n    user: t\nusers:\n- name: t\n  user: {}\n');
    sidecar = new CachedSidecar(dir, kubeconfig);
  });

  afterEach(async () => {
    for (const inf of informers.splice(0)) inf.stop();
    await sidecar.terminate();
    await emu.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('keeps the mirror across two restarts under churn without a RESET', T, async (t) => {
    await sidecar.start('run0.log');
    const { informer, story } = newInformer();
    informer.start();
    assert.ok(await informer.waitForSync(TIMEOUT_MS), sidecar.log('run0.log'));
    const churn = new Churn(emu);
    const began = Date.now();
    churn.start();
    try {
      await moreEvents(informer, story, 30);
      for (const run of [1, 2]) {
        assert.strictEqual(await sidecar.terminate(), 0);
        // Changes while no sidecar runs reach the mirror as ordinary events
        // after the restart (the informer catches up from the snapshot).
        const done = churn.done;
        await pollUntil(() => churn.done >= done + 20, TIMEOUT_MS, 'churn while down');
        await sidecar.start(`run${run}.log`);
        await moreEvents(informer, story, 30);
        assert.match(sidecar.log(`run${run}.log`), /Watch history loaded/);
      }
    } finally {
      await churn.stop();
    }
    t.diagnostic(`churn: ${churn.done} rounds (1.4 changes each) in ${(Date.now() - began) / 1000} s`);
    await expectConverged(informer);
    assert.strictEqual(informer.resets, 0, `after ${churn.done} changes`);
    assert.strictEqual(informer.initialStates, 1, 'no second initial state');
    assert.ok(informer.reconnects >= 2, String(informer.reconnects));
    assert.deepStrictEqual(story.errors, []);
  });

  // Outside the API server's watch window (it restarted while the sidecar
  // was down): the informer relists once, diffed against the snapshot, and
  // those differences continue the history like any event: still no RESET.
  it('continues the history with a relist after the restart', T, async () => {
    await sidecar.start('a.log');
    const { informer, story } = newInformer();
    informer.start();
    assert.ok(await informer.waitForSync(TIMEOUT_MS), sidecar.log('a.log'));
    const initial = story.events;
    assert.strictEqual(await sidecar.terminate(), 0);
    for (const i of [4, 40, 140]) {
      const res = await emu.patch(`cm-${String(i).padStart(6, '0')}`, { while: 'down' });
      assert.strictEqual(res.status, 200, res.body);
    }
    const del = await emu.request('DELETE', '/api/v1/namespaces/benchcms/configmaps/cm-000009');
    assert.strictEqual(del.status, 200, del.body);
    // The watch from the snapshot's resourceVersion now gets 410.
    const restart = await emu.request('POST', '/_emulator/restart?resource=configmaps', {});
    assert.strictEqual(restart.status, 200, restart.body);

    await sidecar.start('b.log');
    await expectConverged(informer);
    assert.match(sidecar.log('b.log'), /Watch history loaded/);
    // The premise: the catching up was one relist.
    assert.strictEqual(await sidecar.metric('informer_sidecar_informer_lists_total'), 1, sidecar.log('b.log'));
    // The differences arrived as events: three updates and a delete.
    assert.strictEqual(informer.getByKey('benchcms/cm-000040')?.data?.while, 'down');
    assert.strictEqual(informer.getByKey('benchcms/cm-000009'), undefined);
    assert.strictEqual(story.events, initial + 4);
    assert.strictEqual(informer.resets, 0);
    assert.strictEqual(informer.initialStates, 1);
    assert.deepStrictEqual(story.errors, []);
  });

  it('RESETs tokens outside the persisted history, and converges', T, async () => {
    const history = ['--watch_history=50'];
    await sidecar.start('a.log', history);
    const first = newInformer();
    first.informer.start();
    assert.ok(await first.informer.waitForSync(TIMEOUT_MS), sidecar.log('a.log'));
    const syncedToken = first.informer.resumeToken;
    const churn = new Churn(emu);
    churn.start();
    try {
      // Past the 50 events the history keeps.
      await moreEvents(first.informer, first.story, 120);
    } finally {
      await churn.stop();
    }
    await expectConverged(first.informer);
    const lastToken = first.informer.resumeToken;
    first.informer.stop();
    assert.strictEqual(await sidecar.terminate(), 0);

    await sidecar.start('b.log', history);
    // Older than the persisted history: RESET, then the whole state.
    const old = newInformer(syncedToken);
    old.informer.start();
    assert.ok(await old.informer.waitForSync(TIMEOUT_MS));
    assert.strictEqual(old.informer.resets, 1);
    await expectConverged(old.informer);
    old.informer.stop();
    // The last position before the restart: resumed; the next event is the
    // next change.
    const last = newInformer(lastToken);
    const updates: string[] = [];
    last.informer.on('update', (_o, obj) => updates.push(objectKey(obj)));
    last.informer.on('add', (obj) => updates.push(`add ${objectKey(obj)}`));
    last.informer.start();
    const res = await emu.patch('cm-000001', { after: 'restart' });
    assert.strictEqual(res.status, 200, res.body);
    assert.ok(await last.informer.waitFor(() => last.informer.list().length > 0, TIMEOUT_MS));
    // Resumed into an empty mirror: the change is its first object, added.
    assert.deepStrictEqual(updates, ['add benchcms/cm-000001']);
    assert.strictEqual(last.informer.resets, 0);
    assert.strictEqual(last.informer.initialStates, 0);
    last.informer.stop();

    // A run that crashed: b issued positions past a's snapshot and was
    // killed before writing its own; c starts from a's snapshot, and a
    // mirror that followed b gets RESET, then converges.
    const second = newInformer();
    second.informer.start();
    assert.ok(await second.informer.waitForSync(TIMEOUT_MS));
    const churn2 = new Churn(emu);
    churn2.start();
    try {
      await moreEvents(second.informer, second.story, 30);
    } finally {
      await churn2.stop();
    }
    await expectConverged(second.informer);
    await sidecar.kill();
    await sidecar.start('c.log', history);
    assert.ok(await second.informer.waitFor((inf) => inf.resets >= 1, TIMEOUT_MS), sidecar.log('c.log'));
    await expectConverged(second.informer);
    assert.strictEqual(second.informer.resets, 1);
    assert.strictEqual(second.informer.initialStates, 2);
    assert.deepStrictEqual(second.story.errors, []);
  });
});
