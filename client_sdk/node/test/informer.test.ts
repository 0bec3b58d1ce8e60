// RemoteInformer against the real sidecar binary in demo mode (its cluster
// changes every second: a web Pod of namespace demo is replaced, ConfigMap
// demo/web-config's data.tick and Deployment shop/cart's status change).
import * as assert from 'assert';
import * as grpc from '@grpc/grpc-js';
import { after, before, describe, it } from 'node:test';

import { DemoSidecar, InformerClient, RemoteInformer, SidecarError, StreamFailure, objectKey } from '../src';
import {
  BINARY, Recorder, TIMEOUT_MS, TcpProxy, rvs, spyConsoleWarn, waitMirrorMatches,
} from './helpers';

const T = { timeout: 3 * TIMEOUT_MS };

describe('RemoteInformer on a shared demo sidecar', () => {
  let sidecar: DemoSidecar;
  let client: InformerClient;
  const informers: RemoteInformer[] = [];
  const track = (inf: RemoteInformer) => {
    informers.push(inf);
    return inf;
  };

  before(async () => {
    sidecar = await new DemoSidecar(BINARY).start();
    client = new InformerClient({ target: sidecar.target, timeoutMs: TIMEOUT_MS });
  });
  after(async () => {
    for (const inf of informers) inf.stop();
    client?.close();
    await sidecar?.close();
  });

  it('mirrors the demo pods: initial state, live adds and deletes, indexes', T, async () => {
    const informer = track(new RemoteInformer('pods', { target: sidecar.target }));
    const rec = new Recorder(informer);
    assert.strictEqual(informer.hasSynced(), false);
    informer.start();
    assert.strictEqual(await informer.waitForSync(TIMEOUT_MS), true);
    assert.strictEqual(informer.initialStates, 1);
    assert.strictEqual(informer.resets, 0);
    // The seed: web (3 replicas) and api (2) in demo, cart (2) and checkout
    // (1) in shop; the churn replaces a web Pod (delete, then create).
    const objs = informer.list();
    assert.ok(objs.length === 7 || objs.length === 8, String(objs.length));
    assert.strictEqual(informer.byIndex('namespace', 'shop').length, 3);
    // Every object of the initial state was added as initial, before any
    // live change (one may already have followed in the same message).
    const initialAdds = rec.calls.filter((c) => c.kind === 'add' && c.flag === true);
    assert.ok(initialAdds.length === 7 || initialAdds.length === 8, JSON.stringify(rec.calls));
    const firstLive = rec.calls.findIndex((c) => c.flag !== true);
    assert.ok(firstLive === -1 || firstLive === initialAdds.length, JSON.stringify(rec.calls));
    const first = objs[0];
    assert.strictEqual(informer.get(first.metadata.namespace, first.metadata.name), first);
    assert.strictEqual(informer.getByKey(objectKey(first)), first);
    assert.strictEqual(informer.get('nope', 'nothing'), undefined);

    // Local indexes agree with the mirror.
    assert.deepStrictEqual(informer.indexValues('namespace'), ['demo', 'shop']);
    for (const ns of ['demo', 'shop']) {
      assert.deepStrictEqual(informer.byIndex('namespace', ns).map(objectKey),
        informer.keys().filter((k) => k.startsWith(`${ns}/`)));
    }
    const apps = informer.indexValues('label:app');
    assert.deepStrictEqual(apps, ['app-1', 'app-2', 'app-3', 'app-4']);
    assert.strictEqual(apps.reduce((n, a) => n + informer.byIndex('label:app', a).length, 0),
      informer.list().length);
    assert.throws(() => informer.byIndex('nope', 'x'), RangeError);

    // The churn: a web Pod is deleted and its replacement added, live.
    assert.ok(await informer.waitFor(() =>
      rec.calls.some((c) => c.kind === 'add' && c.flag === false) &&
      rec.calls.some((c) => c.kind === 'delete' && c.flag === false), TIMEOUT_MS),
    JSON.stringify(rec.calls));
    await waitMirrorMatches(informer, client, 'pods');
    rec.assertModelIsMirror();
    // The web pods' label index follows the churn.
    assert.deepStrictEqual(informer.byIndex('label:app', 'app-1').map(objectKey),
      informer.keys().filter((k) => k.startsWith('demo/web-')));
  });

  it('reports updates with the old and the new object (ConfigMaps)', T, async () => {
    const informer = track(new RemoteInformer('configmaps', { target: sidecar.target }));
    const rec = new Recorder(informer);
    const updates: Array<[string, string]> = [];
    informer.on('update', (oldObj, newObj) => {
      if (objectKey(newObj) === 'demo/web-config') updates.push([oldObj.data.tick, newObj.data.tick]);
    });
    informer.start();
    assert.ok(await informer.waitForSync(TIMEOUT_MS));
    assert.deepStrictEqual(informer.keys(),
      ['demo/api-config', 'demo/web-config', 'shop/cart-config', 'shop/checkout-config']);
    assert.ok(await informer.waitFor(() => updates.length >= 2, TIMEOUT_MS));
    for (const [oldTick, newTick] of updates) assert.ok(Number(newTick) > Number(oldTick), `${oldTick}->${newTick}`);
    assert.strictEqual(updates[1][0], updates[0][1]);
    await waitMirrorMatches(informer, client, 'configmaps');
    rec.assertModelIsMirror();
  });

  it('applies the namespace, the label selector and custom indexers', T, async () => {
    const informer = track(new RemoteInformer('pods', {
      target: sidecar.target, namespace: 'demo', labelSelector: 'app=app-1',
      indexers: { node: (obj) => [obj.spec.nodeName] },
    }));
    const rec = new Recorder(informer);
    informer.start();
    assert.ok(await informer.waitForSync(TIMEOUT_MS));
    await waitMirrorMatches(informer, client, 'pods', { namespace: 'demo', labelSelector: 'app=app-1' });
    const objs = informer.list();
    assert.ok(objs.length > 0);
    for (const obj of objs) {
      assert.strictEqual(obj.metadata.namespace, 'demo');
      assert.strictEqual(obj.metadata.labels.app, 'app-1');
    }
    for (const node of informer.indexValues('node')) {
      assert.deepStrictEqual(informer.byIndex('node', node).map(objectKey),
        objs.filter((o) => o.spec.nodeName === node).map(objectKey));
    }
    rec.assertModelIsMirror();
  });

  it('resumes right after the event whose token it is given', T, async () => {
    const a = track(new RemoteInformer('pods', { target: sidecar.target }));
    const recA = new Recorder(a);
    a.start();
    assert.ok(await a.waitForSync(TIMEOUT_MS));
    // A live change seen by A, and its token.
    assert.ok(await a.waitFor(() => recA.calls.some((c) => c.flag !== true), TIMEOUT_MS));
    const at = recA.calls.findIndex((c) => c.flag !== true);
    const token = recA.calls[at].token;
    const b = track(new RemoteInformer('pods', { target: sidecar.target, resumeToken: token }));
    const recB = new Recorder(b);
    b.start();
    // B's mirror starts empty: what A saw as updates B sees as adds, and
    // deletes of objects B never had call no handler; compare the objects
    // that appeared (key and resourceVersion), in order.
    const changes = (calls: typeof recA.calls) =>
      calls.filter((c) => c.kind !== 'delete').map((c) => `${c.key}@${c.rv}`);
    const n = 3;
    assert.ok(await b.waitFor(() => changes(recB.calls).length >= n, TIMEOUT_MS));
    assert.ok(await a.waitFor(() => changes(recA.calls.slice(at + 1)).length >= n, TIMEOUT_MS));
    assert.deepStrictEqual(changes(recB.calls).slice(0, n), changes(recA.calls.slice(at + 1)).slice(0, n));
    assert.ok(recB.calls.every((c) => c.flag !== true), 'a resumed stream has no initial state');
    assert.strictEqual(b.resets, 0);
    assert.strictEqual(b.initialStates, 0);
    assert.strictEqual(b.hasSynced(), false);
    assert.deepStrictEqual(recB.errors, []);
  });

  it('resumes after a stream cut without a new initial state', T, async () => {
    const proxy = await new TcpProxy(sidecar.grpcPort).listen();
    const errors: SidecarError[] = [];
    const warn = spyConsoleWarn();
    try {
      const informer = track(new RemoteInformer('pods', {
        target: proxy.target, initialBackoffMs: 20, maxBackoffMs: 200,
      }));
      informer.on('error', (e) => errors.push(e));
      const rec = new Recorder(informer);
      informer.start();
      assert.ok(await informer.waitForSync(TIMEOUT_MS));
      const before = rec.calls.length;
      proxy.cut();
      // The cut surfaces (error event, log line), the informer reconnects
      // and the churn keeps arriving on the resumed stream.
      assert.ok(await informer.waitFor((inf) => inf.reconnects >= 1, TIMEOUT_MS));
      assert.ok(await informer.waitFor(() => rec.calls.length > before + 2, TIMEOUT_MS));
      assert.ok(errors.length >= 1);
      assert.strictEqual(errors[0].code, grpc.status.UNAVAILABLE, errors[0].message);
      assert.ok(warn.lines.some((l) => l.includes('RemoteInformer(pods)') && l.includes('UNAVAILABLE')),
        JSON.stringify(warn.lines));
      assert.strictEqual(informer.resets, 0);
      assert.strictEqual(informer.initialStates, 1);
      assert.ok(rec.calls.slice(before).every((c) => c.flag !== true), JSON.stringify(rec.calls.slice(before)));
      await waitMirrorMatches(informer, client, 'pods');
      rec.assertModelIsMirror();
      assert.ok(proxy.accepted >= 2);
    } finally {
      for (const inf of informers) inf.stop();
      warn.restore();
      await proxy.close();
    }
  });

  it('reports an unreachable sidecar and syncs once it can be reached', T, async () => {
    // A proxy to a port nobody listens on: every attempt fails.
    const closed = await new TcpProxy(1).listen();
    const deadPort = closed.port;
    await closed.close();
    const proxy = await new TcpProxy(deadPort).listen();
    const errors: SidecarError[] = [];
    try {
      const informer = track(new RemoteInformer('deployments.apps', {
        target: proxy.target, initialBackoffMs: 10, maxBackoffMs: 100,
        logger: { info() {}, warn() {} }, onError: (e) => errors.push(e),
      }));
      informer.start();
      assert.ok(await informer.waitFor((inf) => inf.reconnects >= 2 && errors.length >= 3, TIMEOUT_MS));
      assert.ok(errors.every((e) => e.code === grpc.status.UNAVAILABLE), errors.map(String).join('\n'));
      assert.strictEqual(informer.hasSynced(), false);
      proxy.retarget(sidecar.grpcPort);
      assert.ok(await informer.waitForSync(TIMEOUT_MS));
      await waitMirrorMatches(informer, client, 'deployments.apps');
      assert.strictEqual(informer.list().length, 4);
    } finally {
      for (const inf of informers) inf.stop();
      await proxy.close();
    }
  });

  it('gets RESET and a fresh initial state for a bad resume token', T, async () => {
    const informer = track(new RemoteInformer('configmaps', {
      target: sidecar.target, resumeToken: 'not-a-token',
    }));
    const rec = new Recorder(informer);
    informer.start();
    assert.ok(await informer.waitForSync(TIMEOUT_MS));
    assert.strictEqual(informer.resets, 1);
    assert.notStrictEqual(informer.resumeToken, 'not-a-token');
    const adds = rec.calls.filter((c) => c.kind === 'add');
    assert.strictEqual(adds.length, 4);
    assert.ok(adds.every((c) => c.flag === true), JSON.stringify(adds));
    rec.assertModelIsMirror();
  });

  it('surfaces an unknown resource as a final error with its gRPC code', T, async () => {
    const warn = spyConsoleWarn();
    try {
      const viaOption: Array<[SidecarError, StreamFailure]> = [];
      const viaEvent: SidecarError[] = [];
      const informer = track(new RemoteInformer('nosuchthings', {
        target: sidecar.target, initialBackoffMs: 10, maxBackoffMs: 50,
        onError: (e, f) => viaOption.push([e, f]),
      }));
      informer.on('error', (e) => viaEvent.push(e));
      informer.start();
      // Given up: waitForSync resolves false without waiting its timeout.
      assert.strictEqual(await informer.waitForSync(TIMEOUT_MS), false);
      assert.strictEqual(informer.hasSynced(), false);
      assert.strictEqual(informer.gaveUpOnError, true);
      assert.strictEqual(informer.reconnects, 0);
      assert.strictEqual(viaOption.length, 1);
      assert.strictEqual(viaEvent.length, 1);
      assert.deepStrictEqual(viaOption[0][1], { failures: 1, retryInMs: 0, final: true });
      for (const e of [viaOption[0][0], ...viaEvent]) {
        assert.ok(e instanceof SidecarError);
        assert.strictEqual(e.code, grpc.status.NOT_FOUND);
        assert.strictEqual(e.codeName, 'NOT_FOUND');
        assert.ok(e.details.startsWith('unknown resource'), e.details);
      }
      assert.strictEqual(informer.lastError?.code, grpc.status.NOT_FOUND);
      const lines = warn.lines.filter((l) => l.includes('RemoteInformer(nosuchthings)'));
      assert.strictEqual(lines.length, 1, JSON.stringify(warn.lines));
      assert.match(lines[0], /NOT_FOUND: unknown resource.*final/);
    } finally {
      warn.restore();
    }
  });
});

describe('RemoteInformer across a sidecar restart', () => {
  it('reconciles the mirror after RESET: no second add, differences only', T, async () => {
    const sidecar = await new DemoSidecar(BINARY).start();
    const proxy = await new TcpProxy(sidecar.grpcPort).listen();
    const informer = new RemoteInformer('pods', {
      target: proxy.target, initialBackoffMs: 20, maxBackoffMs: 500, logger: { info() {}, warn() {} },
    });
    const rec = new Recorder(informer);
    try {
      informer.start();
      assert.ok(await informer.waitForSync(TIMEOUT_MS));
      const before = new Set(informer.keys());
      const callsBefore = rec.calls.length;
      await sidecar.restart();
      proxy.retarget(sidecar.grpcPort);
      proxy.cut();
      // The new run does not know the token: RESET, then reconciliation.
      assert.ok(await informer.waitFor((inf) => inf.resets >= 1 && inf.initialStates >= 2, TIMEOUT_MS));
      assert.ok(informer.reconnects >= 1);
      const client = new InformerClient({ target: sidecar.target, timeoutMs: TIMEOUT_MS });
      try {
        await waitMirrorMatches(informer, client, 'pods');
      } finally {
        client.close();
      }
      rec.assertModelIsMirror();
      const afterCalls = rec.calls.slice(callsBefore);
      // Objects the handlers had were never added again unless deleted
      // first; nothing after the RESET is an initial add.
      const readded = afterCalls.filter((c, i) => c.kind === 'add' && before.has(c.key) &&
        !afterCalls.slice(0, i).some((d) => d.kind === 'delete' && d.key === c.key));
      assert.deepStrictEqual(readded, []);
      assert.ok(afterCalls.every((c) => !(c.kind === 'add' && c.flag === true)));
      // The new run has new objects (new uids and resourceVersions): the
      // seeded pods arrive as updates, churned ones as tombstones.
      assert.ok(afterCalls.some((c) => c.kind === 'update'), JSON.stringify(afterCalls));
      assert.ok(informer.hasSynced());
      assert.strictEqual(rvs(informer.list()), rvs([...rec.model.values()]));
    } finally {
      informer.stop();
      await proxy.close();
      await sidecar.close();
    }
  });
});
