// RemoteInformer against a scripted Informer server (real gRPC over
// loopback): the exact handler calls for a resume followed by a RESET whose
// fresh state differs from the mirror in known ways, and for an event the
// SDK cannot decode.
import * as assert from 'assert';
import * as grpc from '@grpc/grpc-js';
import { describe, it } from 'node:test';

import { RemoteInformer, SidecarError } from '../src';
import { informerV1 } from '../src/proto';
import { Recorder, TIMEOUT_MS } from './helpers';

type Obj = { metadata: { namespace: string; name: string; resourceVersion: string }; data: { v: string } };

function obj(name: string, rv: string, data = 'x'): Obj {
  return { metadata: { namespace: 'ns', name, resourceVersion: rv }, data: { v: data } };
}

function ev(type: string, o: Obj | null, token: string, initial = false) {
  return {
    type: `EVENT_TYPE_${type}`, resumeToken: token, initial,
    ...(o ? { object: { json: JSON.stringify(o) }, resourceVersion: o.metadata.resourceVersion } : {}),
  };
}

/** Serves Watch from a script: one list of responses per call; a call past
 * its script ends UNAVAILABLE, except the last one, which stays open. */
async function scriptedServer(scripts: object[][][]):
  Promise<{ target: string; requests: any[]; stop: () => void }> {
  const requests: any[] = [];
  const open: grpc.ServerWritableStream<any, any>[] = [];
  const server = new grpc.Server();
  server.addService(informerV1().Informer.service, {
    Watch: (call: grpc.ServerWritableStream<any, any>) => {
      requests.push(call.request);
      const n = requests.length - 1;
      for (const events of scripts[Math.min(n, scripts.length - 1)]) call.write({ events });
      if (n + 1 < scripts.length) {
        call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'scripted break' });
      } else {
        open.push(call);
      }
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(),
      (err, p) => (err ? reject(err) : resolve(p))));
  return {
    target: `127.0.0.1:${port}`,
    requests,
    stop: () => {
      for (const c of open) c.end();
      server.forceShutdown();
    },
  };
}

describe('RemoteInformer on a scripted stream', () => {
  it('resumes with the last token and reports exactly the differences of a RESET', { timeout: TIMEOUT_MS }, async () => {
    const [a, b, c, d] = [obj('a', '1'), obj('b', '2'), obj('c', '3'), obj('d', '9')];
    const c2 = obj('c', '8', 'changed');
    const server = await scriptedServer([
      // First call: initial state a, b, c; then the stream breaks.
      [[ev('ADDED', a, 't1', true), ev('ADDED', b, 't2', true), ev('ADDED', c, 't3', true),
        ev('INITIAL_STATE_DONE', null, 't4')]],
      // Second call (resuming from t4): the token is not honoured.
      [[ev('RESET', null, 'r0'), ev('ADDED', b, 'r1', true), ev('ADDED', c2, 'r2', true),
        ev('ADDED', d, 'r3', true), ev('INITIAL_STATE_DONE', null, 'r4')],
      [ev('DELETED', b, 'r5'), ev('BOOKMARK', null, 'r6')]],
    ]);
    const errors: SidecarError[] = [];
    const informer = new RemoteInformer('things', {
      target: server.target, initialBackoffMs: 10, logger: { info() {}, warn() {} },
      onError: (e) => errors.push(e),
    });
    const rec = new Recorder(informer);
    try {
      informer.start();
      assert.ok(await informer.waitFor((inf) => inf.resumeToken === 'r6', TIMEOUT_MS), JSON.stringify([informer.resumeToken, server.requests, rec.calls, errors.map(String)]));
      assert.deepStrictEqual(informer.keys(), ['ns/c', 'ns/d']);
      assert.deepStrictEqual(informer.get('ns', 'c'), c2);
      assert.deepStrictEqual(informer.byIndex('namespace', 'ns'), [c2, d]);
      assert.strictEqual(informer.resets, 1);
      assert.strictEqual(informer.initialStates, 2);
      assert.deepStrictEqual(server.requests.map((r) => r.resumeToken), ['', 't4']);
      assert.deepStrictEqual(server.requests.map((r) => [r.resource, r.encoding]),
        [['things', 'ENCODING_JSON'], ['things', 'ENCODING_JSON']]);
      assert.strictEqual(errors.length, 1);
      assert.strictEqual(errors[0].code, grpc.status.UNAVAILABLE);
      assert.strictEqual(errors[0].details, 'scripted break');
      assert.deepStrictEqual(rec.errors, []);
      assert.deepStrictEqual(rec.calls.map((x) => [x.kind, x.key, x.flag]), [
        ['add', 'ns/a', true],
        ['add', 'ns/b', true],
        ['add', 'ns/c', true],
        ['delete', 'ns/a', true], // gone: tombstone
        ['update', 'ns/c', null], // changed
        ['add', 'ns/d', false], // new since the mirror
        ['delete', 'ns/b', false], // live delete
      ]); // b unchanged by the RESET: no call at all
    } finally {
      informer.stop();
      server.stop();
    }
  });

  it('ends a stream with an undecodable event as INTERNAL and resumes before it', { timeout: TIMEOUT_MS }, async () => {
    const a = obj('a', '1');
    const server = await scriptedServer([
      [[ev('ADDED', a, 't1', true), ev('INITIAL_STATE_DONE', null, 't2'),
        { type: 'EVENT_TYPE_MODIFIED', resumeToken: 't3', object: { json: '{not json' } }]],
      [[ev('MODIFIED', obj('a', '2'), 't3')]],
    ]);
    const errors: SidecarError[] = [];
    const informer = new RemoteInformer('things', {
      target: server.target, initialBackoffMs: 10, logger: { info() {}, warn() {} },
    });
    informer.on('error', (e) => errors.push(e));
    try {
      informer.start();
      assert.ok(await informer.waitFor((inf) => inf.resumeToken === 't3', TIMEOUT_MS));
      assert.strictEqual(informer.get('ns', 'a')?.metadata.resourceVersion, '2');
      assert.deepStrictEqual(server.requests.map((r) => r.resumeToken), ['', 't2']);
      assert.strictEqual(errors[0].code, grpc.status.INTERNAL);
      assert.match(errors[0].details, /EVENT_TYPE_MODIFIED/);
    } finally {
      informer.stop();
      server.stop();
    }
  });
});
