// Prints the adds, updates and deletes of pods matching a label selector
// (the Node twin of client_sdk/python/examples/pod_watcher.py).
//
// Against a running sidecar (default 127.0.0.1:50051):
//     node dist/examples/pod_watcher.js --selector 'tier=web'
// Or starting the sidecar in demo mode itself:
//     node dist/examples/pod_watcher.js --sidecar ../../bazel-bin/server/informer_sidecar
import { parseArgs } from 'util';

import { DemoSidecar, KubeObject, RemoteInformer, objectKey } from '../src';

function rv(obj: KubeObject): string {
  return obj?.metadata?.resourceVersion ?? '';
}

async function main(): Promise<number> {
  const { values: args } = parseArgs({
    options: {
      target: { type: 'string', default: '127.0.0.1:50051' }, // host:port or unix:/path
      sidecar: { type: 'string', default: '' }, // run this binary in demo mode instead
      selector: { type: 'string', default: 'tier=web' }, // Kubernetes label selector
      namespace: { type: 'string', default: '' }, // only this namespace (default: all)
      duration: { type: 'string', default: '0' }, // exit after this many seconds (0: on Ctrl-C)
    },
  });
  let sidecar: DemoSidecar | null = null;
  let target = args.target!;
  if (args.sidecar) {
    sidecar = await new DemoSidecar(args.sidecar).start();
    target = sidecar.target;
  }
  const informer = new RemoteInformer('pods', {
    target, namespace: args.namespace || undefined, labelSelector: args.selector,
  });
  informer.on('add', (obj, isInitial) => {
    console.log(`ADDED    ${objectKey(obj).padEnd(40)} rv=${rv(obj)}${isInitial ? '  (initial)' : ''}`);
  });
  informer.on('update', (oldObj, newObj) => {
    console.log(`UPDATED  ${objectKey(newObj).padEnd(40)} rv=${rv(oldObj)}->${rv(newObj)}`);
  });
  informer.on('delete', (obj, tombstone) => {
    console.log(`DELETED  ${objectKey(obj).padEnd(40)} rv=${rv(obj)}${tombstone ? '  (tombstone)' : ''}`);
  });
  // Stream failures are logged (console.warn) and retried by the informer.
  informer.on('error', () => {});

  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => { finish = resolve; });
  process.on('SIGINT', () => finish());
  process.on('SIGTERM', () => finish());
  const seconds = Number(args.duration);
  if (seconds > 0) setTimeout(() => finish(), seconds * 1000);

  let rc = 0;
  informer.start();
  if (!(await informer.waitForSync(30_000))) {
    console.error('not synced after 30s');
    rc = 1;
  } else {
    const apps = informer.indexValues('label:app');
    console.log(`SYNCED   ${informer.list().length} pods; by label app: ` +
      apps.map((a) => `${a}=${informer.byIndex('label:app', a).length}`).join(', '));
    await done;
  }
  informer.stop();
  await sidecar?.close();
  return rc;
}

main().then((rc) => process.exit(rc), (err) => {
  console.error(err);
  process.exit(1);
});
