// A controller on a remote work queue: records an Event for every ConfigMap
// with a given label, retrying failures with back-off (the Node twin of
// client_sdk/python/examples/configmap_controller.py).
//
// The sidecar enqueues the key of every matching ConfigMap when it changes;
// the worker looks the object up in a local mirror (a RemoteInformer) and
// records a "Reconciled" Event about it. To show retries, the first attempt
// of every key fails (--fail_first=true): the sidecar retries it after the
// queue's exponential back-off.
//
// Against a running sidecar (default 127.0.0.1:50051):
//     node dist/examples/configmap_controller.js
// Or starting the sidecar in demo mode itself:
//     node dist/examples/configmap_controller.js --sidecar ../../bazel-bin/server/informer_sidecar
import { parseArgs } from 'util';

import {
  DemoSidecar, RemoteInformer, WorkQueueWorker, createQueue, objectReference, recordEvent,
} from '../src';

async function main(): Promise<number> {
  const { values: args } = parseArgs({
    options: {
      target: { type: 'string', default: '127.0.0.1:50051' }, // host:port or unix:/path
      sidecar: { type: 'string', default: '' }, // run this binary in demo mode instead
      selector: { type: 'string', default: 'app' }, // label selector of the ConfigMaps
      queue: { type: 'string', default: 'configmap-controller' },
      workers: { type: 'string', default: '2' },
      fail_first: { type: 'string', default: 'true' }, // fail the first attempt of every key
      duration: { type: 'string', default: '0' }, // exit after this many seconds (0: on Ctrl-C)
    },
  });
  if (!['true', 'false'].includes(args.fail_first!)) {
    console.error('--fail_first: must be true or false');
    return 2;
  }
  const failFirst = args.fail_first === 'true';
  let sidecar: DemoSidecar | null = null;
  let target = args.target!;
  if (args.sidecar) {
    sidecar = await new DemoSidecar(args.sidecar).start();
    target = sidecar.target;
  }

  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => { finish = resolve; });
  process.on('SIGINT', () => finish());
  process.on('SIGTERM', () => finish());
  const seconds = Number(args.duration);
  if (seconds > 0) setTimeout(() => finish(), seconds * 1000);

  const mirror = new RemoteInformer('configmaps', { target, labelSelector: args.selector });
  mirror.on('error', () => {}); // logged (console.warn) and retried
  mirror.start();
  let worker: WorkQueueWorker | null = null;
  let rc = 0;
  try {
    if (!(await mirror.waitForSync(30_000))) {
      console.error('configmaps not synced after 30s');
      return 1;
    }
    const created = await createQueue(args.queue!, 'configmaps', {
      target, labelSelector: args.selector, baseDelayMs: 200, maxDelayMs: 10_000,
    });
    console.log(`queue '${args.queue}' ${created ? 'created' : 'exists'}`);

    const attempts = new Map<string, number>();
    const reconcile = async (key: string) => {
      const attempt = (attempts.get(key) ?? 0) + 1;
      attempts.set(key, attempt);
      const obj = mirror.getByKey(key);
      if (obj === undefined) {
        console.log(`GONE      ${key}`);
        return;
      }
      if (failFirst && attempt === 1) {
        console.log(`FAILED    ${key} (attempt ${attempt}, will retry)`);
        throw new Error(`${key}: simulated failure`);
      }
      const rv = obj.metadata.resourceVersion ?? '';
      await recordEvent(objectReference(obj, 'ConfigMap', 'v1'), 'Normal', 'Reconciled',
        `configmap-controller saw resourceVersion ${rv}`, { target });
      console.log(`RECORDED  ${key} rv=${rv} (attempt ${attempt})`);
    };
    worker = new WorkQueueWorker(args.queue!, reconcile, {
      target, credit: Number(args.workers), name: 'configmap-controller',
      // The simulated failures are the point of the example: keep the log
      // to the lines above.
      logger: { info() {}, warn: (m) => { if (!m.includes('simulated failure')) console.warn(m); } },
    });
    worker.start();
    await done;
  } catch (e) {
    console.error(e);
    rc = 1;
  } finally {
    await worker?.stop();
    mirror.stop();
    await sidecar?.close();
  }
  return rc;
}

main().then((rc) => process.exit(rc), (err) => {
  console.error(err);
  process.exit(1);
});
