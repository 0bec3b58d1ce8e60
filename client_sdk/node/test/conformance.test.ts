// The Node SDK through every scenario of the conformance suite
// (client_sdk/conformance): for each scenario file, the scripted server
// ($INFORMER_CONFORMANCE_SERVER) plays it, a RemoteInformer or a
// WorkQueueWorker is driven against it as the scenario's "client" says, and
// at every checkpoint what the SDK shows (handler calls, mirror, resume
// token, errors and recoveries reported, the worker's handler outcomes) is
// sent to the server until it matches, or the test fails after the deadline
// with the last difference.
import * as assert from 'assert';
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as readline from 'readline';
import { describe, it } from 'node:test';

import { KubeObject, RemoteInformer, SidecarError, StreamFailure, WorkQueueWorker, objectKey } from '../src';

const SERVER = process.env.INFORMER_CONFORMANCE_SERVER ?? '';
const SCENARIOS = path.resolve(__dirname, '..', '..', '..', 'conformance', 'scenarios');
const DEADLINE_MS = 20_000;
const QUIET = { info() {}, warn() {} };

type Msg = Record<string, any>;

function rv(obj: KubeObject): string {
  return obj?.metadata?.resourceVersion ?? '';
}

interface Driver {
  observe(): Msg;
  release(key: string, afterExpired: string): Promise<void>;
  stop(): Promise<void>;
}

class InformerDriver implements Driver {
  readonly calls: string[] = [];
  readonly errors: string[] = [];
  readonly recoveries: number[] = [];
  readonly informer: RemoteInformer;

  constructor(client: Msg, target: string) {
    this.informer = new RemoteInformer(client.resource, {
      target, namespace: client.namespace, labelSelector: client.label_selector,
      initialBackoffMs: client.initial_backoff_ms, maxBackoffMs: client.max_backoff_ms,
      logger: QUIET,
      onError: (e: SidecarError, f: StreamFailure) =>
        this.errors.push(e.codeName + (f.final ? ' final' : '')),
      onRecovered: (n) => this.recoveries.push(n),
    });
    this.informer.on('add', (o, initial) =>
      this.calls.push(`add ${objectKey(o)} ${rv(o)}${initial ? ' initial' : ''}`));
    this.informer.on('update', (old, o) => this.calls.push(`update ${objectKey(o)} ${rv(old)} ${rv(o)}`));
    this.informer.on('delete', (o, tomb) =>
      this.calls.push(`delete ${objectKey(o)} ${rv(o)}${tomb ? ' tombstone' : ''}`));
    this.informer.start();
  }

  observe(): Msg {
    const inf = this.informer;
    return {
      calls: [...this.calls],
      errors: [...this.errors],
      recoveries: [...this.recoveries],
      mirror: Object.fromEntries(inf.list().map((o) => [objectKey(o), rv(o)])),
      resume_token: inf.resumeToken,
      synced: inf.hasSynced(),
      stale: inf.isStale(),
    };
  }

  async release(key: string): Promise<void> {
    throw new Error(`release ${key} for an informer`);
  }

  async stop(): Promise<void> {
    this.informer.stop();
  }
}

class WorkerDriver implements Driver {
  readonly errors: string[] = [];
  readonly recoveries: number[] = [];
  readonly started: string[] = [];
  readonly processed: string[] = [];
  private readonly attempts = new Map<string, number>();
  private readonly gates = new Map<string, () => void>();
  private readonly released = new Set<string>();
  readonly worker: WorkQueueWorker;

  constructor(client: Msg, target: string) {
    const fail: Record<string, number> = client.fail ?? {};
    const hold = new Set<string>(client.hold ?? []);
    this.worker = new WorkQueueWorker(client.queue, async (key) => {
      const attempt = (this.attempts.get(key) ?? 0) + 1;
      this.attempts.set(key, attempt);
      this.started.push(key);
      if (hold.has(key) && attempt === 1 && !this.released.has(key)) {
        await new Promise<void>((resolve) => this.gates.set(key, resolve));
      }
      if (attempt <= (fail[key] ?? 0)) {
        this.processed.push(`${key} FAIL`);
        throw new Error(`scripted failure of ${key}`);
      }
      this.processed.push(`${key} FORGET`);
    }, {
      target, credit: 1, name: client.name, logger: QUIET,
      initialBackoffMs: client.initial_backoff_ms, maxBackoffMs: client.max_backoff_ms,
      onError: (e) => this.errors.push(e.codeName),
      onRecovered: (n) => this.recoveries.push(n),
    });
    this.worker.start();
  }

  observe(): Msg {
    return {
      errors: [...this.errors],
      recoveries: [...this.recoveries],
      started: [...this.started],
      processed: [...this.processed],
    };
  }

  async release(key: string, afterExpired: string): Promise<void> {
    if (afterExpired) {
      const deadline = Date.now() + DEADLINE_MS;
      while (!this.worker.isExpired(String(afterExpired))) {
        if (Date.now() > deadline) throw new Error(`lease ${afterExpired} never known as expired`);
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    this.released.add(key);
    this.gates.get(key)?.();
  }

  async stop(): Promise<void> {
    await this.worker.stop();
  }
}

/** The scripted server's stdout as a queue of JSON messages. */
class Lines {
  private readonly queue: Array<Msg | null> = [];
  private wake: (() => void) | null = null;

  constructor(proc: ChildProcess) {
    const rl = readline.createInterface({ input: proc.stdout! });
    rl.on('line', (line) => this.push(JSON.parse(line)));
    rl.on('close', () => this.push(null));
  }

  private push(m: Msg | null): void {
    this.queue.push(m);
    this.wake?.();
  }

  async next(): Promise<Msg> {
    const deadline = Date.now() + 3 * DEADLINE_MS;
    while (this.queue.length === 0) {
      if (Date.now() > deadline) throw new Error('the scripted server went silent');
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        setTimeout(resolve, 1000);
      });
      this.wake = null;
    }
    const m = this.queue.shift()!;
    if (m === null) throw new Error('the scripted server exited');
    return m;
  }
}

async function runScenario(file: string): Promise<void> {
  const proc = spawn(SERVER, [file], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((resolve) => proc.on('exit', () => resolve()));
  const lines = new Lines(proc);
  const send = (m: Msg) => proc.stdin!.write(`${JSON.stringify(m)}\n`);
  let driver: Driver | null = null;
  try {
    const hello = await lines.next();
    const target = `127.0.0.1:${hello.listening}`;
    driver = hello.client.kind === 'informer' ? new InformerDriver(hello.client, target)
      : new WorkerDriver(hello.client, target);
    for (;;) {
      const msg = await lines.next();
      if (msg.done) {
        assert.ok(msg.ok, `scenario failed: ${msg.error}`);
        return;
      }
      if (msg.release !== undefined) {
        await driver.release(msg.release, msg.after_expired);
        continue;
      }
      const deadline = Date.now() + DEADLINE_MS;
      for (;;) {
        send({ observe: driver.observe() });
        const reply = await lines.next();
        if (reply.match) break;
        if (reply.done) assert.fail(`scenario failed: ${reply.error}`);
        if (Date.now() > deadline) assert.fail(`checkpoint ${JSON.stringify(msg.checkpoint)}: ${reply.diff}`);
        // Polls again after a short while: the SDK works on this thread.
        await new Promise((r) => setTimeout(r, 10));
      }
    }
  } finally {
    await driver?.stop();
    proc.stdin!.end();
    const killer = setTimeout(() => proc.kill('SIGKILL'), DEADLINE_MS);
    await exited;
    clearTimeout(killer);
  }
}

describe('conformance scenarios', () => {
  it('has the scripted server and the scenarios', () => {
    assert.ok(SERVER && fs.existsSync(SERVER),
      `INFORMER_CONFORMANCE_SERVER: ${SERVER || 'unset'} (bazel build //client_sdk/conformance:scripted_server)`);
    assert.ok(fs.readdirSync(SCENARIOS).filter((f) => f.endsWith('.json')).length >= 16);
  });
  for (const f of fs.readdirSync(SCENARIOS).filter((n) => n.endsWith('.json')).sort()) {
    it(f.replace(/\.json$/, ''), { timeout: 5 * DEADLINE_MS }, () => runScenario(path.join(SCENARIOS, f)));
  }
});
