// InformerClient, WorkQueueWorker, recordEvent and the examples against the
// real sidecar binary in demo mode.
import * as assert from 'assert';
import { spawn } from 'child_process';
import * as path from 'path';
import * as grpc from '@grpc/grpc-js';
import { after, before, describe, it } from 'node:test';

import {
  DemoSidecar, InformerClient, Lease, SidecarError, WorkQueueWorker, addAfter, createQueue,
  deleteQueue, forget, objectKey, objectReference, queueStats, recordEvent,
} from '../src';
import { informerV1 } from '../src/proto';
import { BINARY, TIMEOUT_MS, TcpProxy } from './helpers';

const T = { timeout: 3 * TIMEOUT_MS };

async function rejectsWith(p: Promise<unknown>, code: grpc.status, text?: RegExp): Promise<SidecarError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof SidecarError, String(e));
    assert.strictEqual(e.code, code, e.message);
    if (text) assert.match(e.details, text);
    return e;
  }
  assert.fail(`expected ${grpc.status[code]}`);
}

describe('against a shared demo sidecar', () => {
  let sidecar: DemoSidecar;
  let client: InformerClient;

  before(async () => {
    sidecar = await new DemoSidecar(BINARY).start();
    client = new InformerClient({ target: sidecar.target, timeoutMs: TIMEOUT_MS });
  });
  after(async () => {
    client?.close();
    await sidecar?.close();
  });

  it('InformerClient queries the cache', T, async () => {
    // Wait for the informers to sync (unary queries answer UNAVAILABLE until then).
    let resources = await client.resources();
    const deadline = Date.now() + TIMEOUT_MS;
    while (!resources.every((r) => r.synced) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      resources = await client.resources();
    }
    assert.deepStrictEqual(resources.map((r) => r.resource), ['configmaps', 'deployments.apps', 'pods']);
    const cms = resources[0];
    assert.strictEqual(cms.synced, true);
    assert.strictEqual(cms.objectCount, 4);
    assert.ok(cms.indexes.includes('namespace'));

    // ConfigMaps: the churn changes their data, never their keys.
    const everything = await client.list('configmaps');
    const keys = everything.map(objectKey);
    assert.deepStrictEqual(keys,
      ['demo/api-config', 'demo/web-config', 'shop/cart-config', 'shop/checkout-config']);
    // One object per page: the same snapshot, page after page.
    const paged: string[] = [];
    for await (const o of client.iterList('configmaps', { pageSize: 1 })) paged.push(objectKey(o));
    assert.deepStrictEqual(paged, keys);

    const got = await client.get('configmaps', 'demo', 'api-config');
    assert.strictEqual(got?.data?.LOG_LEVEL, 'info');
    assert.strictEqual(await client.get('configmaps', 'demo', 'no-such-name'), null);
    assert.deepStrictEqual((await client.list('configmaps', { namespace: 'shop' })).map(objectKey),
      ['shop/cart-config', 'shop/checkout-config']);
    assert.deepStrictEqual((await client.byIndex('configmaps', 'namespace', 'shop')).map(objectKey),
      ['shop/cart-config', 'shop/checkout-config']);
    assert.deepStrictEqual(await client.indexValues('configmaps', 'namespace'), ['demo', 'shop']);

    // Label selectors and the owner index, on Pods.
    const web = await client.list('pods', { labelSelector: 'app=app-1' });
    assert.ok(web.length > 0);
    for (const o of web) assert.strictEqual(o.metadata.labels.app, 'app-1');
    const owner = web[0].metadata.ownerReferences[0].uid;
    assert.ok((await client.indexValues('pods', 'ownerUid')).includes(owner));
    const children = await client.byIndex('pods', 'ownerUid', owner);
    assert.ok(children.length > 0);
    for (const o of children) assert.ok(o.metadata.ownerReferences.some((r: any) => r.uid === owner));

    // Errors carry the sidecar's code and message.
    await rejectsWith(client.get('nosuchthings', '', 'x'), grpc.status.NOT_FOUND, /^unknown resource/);
    await rejectsWith(client.list('pods', { labelSelector: 'app in (' }), grpc.status.INVALID_ARGUMENT);
    await rejectsWith(client.byIndex('pods', 'no-such-index', 'x'), grpc.status.INVALID_ARGUMENT);
    await assert.rejects(client.get('pods', 'demo', ''), RangeError);
    const closed = new InformerClient({ target: sidecar.target });
    closed.close();
    await assert.rejects(closed.list('configmaps'), /closed/);
  });

  it('WorkQueueWorker forgets successes and retries failures with back-off', T, async () => {
    const name = 'node-e2e-worker';
    const opts = { target: sidecar.target, baseDelayMs: 50, maxDelayMs: 1000 };
    assert.strictEqual(await createQueue(name, 'configmaps', opts), true);
    assert.strictEqual(await createQueue(name, 'configmaps', opts), false);
    await rejectsWith(createQueue(name, 'configmaps', { ...opts, maxDelayMs: 2000 }),
      grpc.status.ALREADY_EXISTS);
    await rejectsWith(createQueue('node-e2e-bad', 'nosuchthings', { target: sidecar.target }),
      grpc.status.NOT_FOUND);
    const keys = (await client.list('configmaps')).map(objectKey);
    const leases = new Map<string, Lease[]>();
    let running = 0;
    let maxRunning = 0;
    const fn = async (key: string, lease: Lease) => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      try {
        const seen = leases.get(key) ?? [];
        seen.push(lease);
        leases.set(key, seen);
        await new Promise((r) => setImmediate(r)); // an asynchronous handler
        if (seen.length === 1) throw new Error(`first attempt of ${key} fails`);
      } finally {
        running--;
      }
    };
    const worker = new WorkQueueWorker(name, fn, {
      target: sidecar.target, credit: 2, name: 'node-e2e', logger: { info() {}, warn() {} },
    });
    worker.start();
    try {
      const n = keys.length;
      // demo/web-config changes every second, so it is leased again and
      // again: wait for each key's retry, not for counts.
      const retried = () => keys.every((k) => (leases.get(k)?.length ?? 0) >= 2);
      assert.ok(await worker.waitFor((w) => retried() && w.failed >= n && w.processed >= n, TIMEOUT_MS),
        `failed=${worker.failed} processed=${worker.processed} leases=${JSON.stringify([...leases])}`);
      // Every key was leased, failed once and was retried until it succeeded.
      for (const key of keys) {
        const got = leases.get(key) ?? [];
        assert.ok(got.length >= 2, key);
        assert.strictEqual(got[0].failures, 0);
        assert.strictEqual(got[1].failures, 1);
        const [ns, nm] = key.split('/');
        assert.deepStrictEqual([got[0].key, got[0].namespace, got[0].name], [key, ns, nm]);
        assert.ok(got[0].timeoutMs > 0 && got[0].timeoutMs <= 5 * 60_000);
        assert.notStrictEqual(got[0].leaseId, got[1].leaseId);
      }
      assert.ok(maxRunning <= 2, `credit 2 but ${maxRunning} ran at once`);
      assert.strictEqual(worker.rejected, 0);
      // A key added by hand is leased too (and fails once, then succeeds).
      await addAfter(name, 'custom/key', 0, { target: sidecar.target });
      assert.ok(await worker.waitFor(() => (leases.get('custom/key')?.length ?? 0) >= 2, TIMEOUT_MS));
      await forget(name, 'custom/key', { target: sidecar.target });
      // The last results may still be on their way to the sidecar: poll.
      let [stats] = await queueStats(name, { target: sidecar.target });
      const deadline = Date.now() + TIMEOUT_MS;
      while (stats.completed < 2 * (n + 1) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        [stats] = await queueStats(name, { target: sidecar.target });
      }
      assert.strictEqual(stats.name, name);
      assert.strictEqual(stats.resource, 'configmaps');
      assert.strictEqual(stats.workers, 1);
      assert.ok(stats.failures >= n + 1, JSON.stringify(stats));
      assert.ok(stats.retries >= n + 1, JSON.stringify(stats));
      assert.ok(stats.completed >= 2 * (n + 1), JSON.stringify(stats));
    } finally {
      await worker.stop();
    }
    await deleteQueue(name, { target: sidecar.target });
    assert.deepStrictEqual(await queueStats(name, { target: sidecar.target }).catch((e) => e.code),
      grpc.status.NOT_FOUND);
  });

  it('WorkQueueWorker does not report an expired lease, whose key is leased again', T, async () => {
    const name = 'node-e2e-expiry';
    // demo/api-config only: the demo's churn never changes it.
    await createQueue(name, 'configmaps', { target: sidecar.target, labelSelector: 'app=api', leaseTimeoutMs: 300 });
    const leases: Lease[] = [];
    let worker: WorkQueueWorker | null = null;
    const fn = async (key: string, lease: Lease) => {
      leases.push(lease);
      if (leases.length > 1) return;
      // Hold the first lease until the sidecar takes it back.
      const deadline = Date.now() + TIMEOUT_MS;
      while (!worker!.isExpired(lease.leaseId) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    worker = new WorkQueueWorker(name, fn, { target: sidecar.target, logger: { info() {}, warn() {} } });
    worker.start();
    try {
      assert.ok(await worker.waitFor((w) => w.processed >= 2, TIMEOUT_MS), JSON.stringify(leases));
      assert.deepStrictEqual(leases.map((l) => l.key), ['demo/api-config', 'demo/api-config']);
      assert.notStrictEqual(leases[0].leaseId, leases[1].leaseId);
      assert.strictEqual(worker.rejected, 0, 'the expired lease was reported');
      let [stats] = await queueStats(name, { target: sidecar.target });
      const deadline = Date.now() + TIMEOUT_MS;
      while (stats.completed < 1 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        [stats] = await queueStats(name, { target: sidecar.target });
      }
      assert.strictEqual(stats.expired, 1, JSON.stringify(stats));
      assert.strictEqual(stats.completed, 1, JSON.stringify(stats));
    } finally {
      await worker.stop();
      await deleteQueue(name, { target: sidecar.target });
    }
  });

  it('WorkQueueWorker reconnects after a cut; the broken stream\'s key is leased again', T, async () => {
    const name = 'node-e2e-cut';
    await createQueue(name, 'configmaps', { target: sidecar.target, labelSelector: 'app=api' });
    const proxy = await new TcpProxy(sidecar.grpcPort).listen();
    const leases: Lease[] = [];
    const errors: SidecarError[] = [];
    const fn = async (key: string, lease: Lease) => {
      leases.push(lease);
      if (leases.length > 1) return;
      // The connection breaks while the first lease is held, and the lease
      // ends once the worker holds a new stream (a new connection).
      proxy.cut();
      const deadline = Date.now() + TIMEOUT_MS;
      while ((errors.length === 0 || proxy.accepted < 2) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const worker = new WorkQueueWorker(name, fn, {
      target: proxy.target, initialBackoffMs: 10, maxBackoffMs: 100,
      logger: { info() {}, warn() {} }, onError: (e) => errors.push(e),
    });
    worker.start();
    try {
      assert.ok(await worker.waitFor((w) => w.processed >= 2, TIMEOUT_MS), JSON.stringify(leases));
      assert.strictEqual(errors[0].code, grpc.status.UNAVAILABLE, errors[0].message);
      assert.deepStrictEqual(leases.map((l) => l.key), ['demo/api-config', 'demo/api-config']);
      assert.strictEqual(worker.rejected, 0, 'a result of the broken stream was reported');
      let [stats] = await queueStats(name, { target: sidecar.target });
      const deadline = Date.now() + TIMEOUT_MS;
      while (stats.completed < 1 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
        [stats] = await queueStats(name, { target: sidecar.target });
      }
      assert.strictEqual(stats.returned, 1, JSON.stringify(stats));
      assert.strictEqual(stats.completed, 1, JSON.stringify(stats));
    } finally {
      await worker.stop();
      await proxy.close();
      await deleteQueue(name, { target: sidecar.target });
    }
  });

  it('WorkQueueWorker surfaces a Lease stream error', T, async () => {
    const errors: SidecarError[] = [];
    const worker = new WorkQueueWorker('node-no-such-queue', () => {}, {
      target: sidecar.target, initialBackoffMs: 10, maxBackoffMs: 50,
      logger: { info() {}, warn() {} }, onError: (e) => errors.push(e),
    });
    worker.start();
    try {
      const deadline = Date.now() + TIMEOUT_MS;
      while (errors.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      assert.ok(errors.length >= 2);
      assert.strictEqual(errors[0].code, grpc.status.NOT_FOUND, errors[0].message);
    } finally {
      await worker.stop();
    }
  });

  it('recordEvent records an event the sidecar streams back', T, async () => {
    const events = new (informerV1().Events)(sidecar.target, grpc.credentials.createInsecure());
    const watch = events.Watch({});
    try {
      // The headers arrive once the watcher is registered: every event
      // recorded afterwards is streamed.
      await new Promise((resolve) => watch.once('metadata', resolve));
      const got = new Promise<any>((resolve) => watch.once('data', resolve));
      const ref = objectReference({ metadata: { namespace: 'demo', name: 'web-config', uid: 'u-1' } },
        'ConfigMap');
      await recordEvent(ref, 'Normal', 'NodeE2ETest', 'hello from node', { target: sidecar.target });
      const { event } = await got;
      assert.strictEqual(event.reason, 'NodeE2ETest');
      assert.strictEqual(event.message, 'hello from node');
      assert.strictEqual(event.type, 'Normal');
      assert.deepStrictEqual([event.object.kind, event.object.namespace, event.object.name, event.object.uid],
        ['ConfigMap', 'demo', 'web-config', 'u-1']);
      await rejectsWith(recordEvent(ref, 'Bad', 'NodeE2ETest', '', { target: sidecar.target }),
        grpc.status.INVALID_ARGUMENT, /type/);
      await assert.rejects(recordEvent({ kind: 'Pod', name: 'x', bogus: 'y' } as any, 'Normal', 'R',
        '', { target: sidecar.target }), RangeError);
      assert.throws(() => objectReference({ metadata: { name: 'x' } }), RangeError);
    } finally {
      watch.on('error', () => {});
      watch.cancel();
      events.close();
    }
  });

  /** Runs an example until every string of `want` appeared in its output,
   * stops it with SIGTERM and returns the output. */
  async function runExample(script: string, args: string[], want: string[]): Promise<string> {
    const proc = spawn(process.execPath, [path.join(__dirname, '..', 'examples', script), ...args],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
    const seen = new Promise<void>((resolve) => {
      const onData = (chunk: Buffer) => {
        out += chunk.toString();
        if (want.every((w) => out.includes(w))) resolve();
      };
      proc.stdout.on('data', onData);
      proc.stderr.on('data', onData);
    });
    let timer: NodeJS.Timeout | undefined;
    const result = await Promise.race([
      seen.then(() => 'seen'),
      exited.then(() => 'exited'),
      new Promise((resolve) => { timer = setTimeout(() => resolve('timeout'), TIMEOUT_MS); }),
    ]);
    clearTimeout(timer);
    proc.kill('SIGTERM');
    const code = await exited;
    assert.strictEqual(result, 'seen', `missing ${want.filter((w) => !out.includes(w))} in:\n${out}`);
    assert.strictEqual(code, 0, out);
    return out;
  }

  it('pod_watcher example', T, async () => {
    const out = await runExample('pod_watcher.js', ['--target', sidecar.target, '--selector', 'tier=web'],
      ['(initial)', 'SYNCED', 'DELETED']);
    assert.match(out, /ADDED/);
  });

  it('configmap_controller example', T, async () => {
    const out = await runExample('configmap_controller.js', ['--target', sidecar.target, '--queue', 'node-example'],
      ["queue 'node-example' created", 'FAILED    demo/api-config', 'RECORDED  demo/api-config']);
    assert.match(out, /will retry/);
  });

  it('an example starts its own sidecar', T, async () => {
    await runExample('pod_watcher.js', ['--sidecar', BINARY], ['SYNCED']);
  });
});
