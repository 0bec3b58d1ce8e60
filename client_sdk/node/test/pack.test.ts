// The package as a user installs it: `npm pack` of a clean copy of the
// package (no proto/, no dist/: its prepare script fills both), the tarball
// installed with `npm install <tarball>` into an application directory
// outside the repository (its dependencies from the npm registry), and that
// application mirroring the demo cluster of the real sidecar binary, and
// the README's quick start run there as printed. The
// application's environment names no proto directory: the package must load
// the protos it carries.
import * as assert from 'assert';
import { execFile, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { describe, it } from 'node:test';

import { DemoSidecar } from '../src';
import { BINARY } from './helpers';

const PACKAGE = path.resolve(__dirname, '..', '..');
const REPO = path.resolve(PACKAGE, '..', '..');
const T = { timeout: 600_000 };

/** Runs a command; resolves with its stdout, rejects with its output. */
function run(cmd: string, args: string[], cwd: string, env = process.env, timeoutMs = 300_000):
  Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd, env, timeout: timeoutMs, maxBuffer: 64 << 20 },
      (err, stdout, stderr) => {
        if (err) reject(new Error(`${cmd} ${args.join(' ')} in ${cwd}: ${err.message}\n${stdout}\n${stderr}`));
        else resolve(stdout);
      });
  });
}

/** The environment without the SDK's proto override. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.INFORMER_SIDECAR_PROTO_DIR;
  delete env.INFORMER_SIDECAR_PROTO_ROOT;
  return env;
}

// The application: mirrors the demo's pods and prints what it holds once
// the mirror equals the sidecar's List of the same resource.
const APP = `
const sdk = require('informer-sidecar');
async function main() {
  const sidecar = await new sdk.DemoSidecar(process.env.INFORMER_SIDECAR_BIN).start();
  const client = new sdk.InformerClient({ target: sidecar.target, timeoutMs: 60000 });
  const pods = new sdk.RemoteInformer('pods', { target: sidecar.target });
  try {
    pods.start();
    if (!(await pods.waitForSync(60000))) throw new Error('no sync within 60 s');
    const rvs = (objs) => JSON.stringify(objs.map((o) =>
      [sdk.objectKey(o), o.metadata.resourceVersion]).sort());
    const deadline = Date.now() + 60000;
    for (;;) {
      const want = rvs(await client.list('pods'));
      if (await pods.waitFor((inf) => rvs(inf.list()) === want, 2000)) break;
      if (Date.now() > deadline) throw new Error('mirror never matched the sidecar');
    }
    console.log(JSON.stringify({ protoDir: sdk.protoDir(), keys: pods.keys(),
      shop: pods.byIndex('namespace', 'shop').length }));
  } finally {
    pods.stop();
    client.close();
    await sidecar.close();
  }
}
main().catch((e) => { console.error(e); process.exit(1); });
`;

describe('the packed package', () => {
  it('installs from its tarball outside the tree and mirrors the demo cluster', T, async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'isd-node-pack-'));
    try {
      // A clean copy of the package where the repository has it, with the
      // repository's protos two levels up, as in a checkout.
      const src = path.join(tmp, 'src');
      const pkg = path.join(src, 'client_sdk', 'node');
      fs.mkdirSync(pkg, { recursive: true });
      for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'README.md']) {
        fs.copyFileSync(path.join(PACKAGE, f), path.join(pkg, f));
      }
      for (const d of ['scripts', 'src', 'test', 'examples']) {
        fs.cpSync(path.join(PACKAGE, d), path.join(pkg, d), { recursive: true });
      }
      fs.cpSync(path.join(REPO, 'proto', 'informer', 'v1'),
        path.join(src, 'proto', 'informer', 'v1'), { recursive: true });
      // The dev dependencies (TypeScript) the prepare script compiles with.
      fs.symlinkSync(path.join(PACKAGE, 'node_modules'), path.join(pkg, 'node_modules'));

      // stdout: the prepare script's lines, then the JSON report.
      const packOut = await run('npm', ['pack', '--json', '--pack-destination', tmp], pkg, cleanEnv());
      const packed = JSON.parse(packOut.slice(packOut.search(/^\[/m)));
      const tarball = path.join(tmp, packed[0].filename);
      const files: string[] = packed[0].files.map((f: { path: string }) => f.path).sort();
      for (const f of ['proto/informer/v1/informer.proto', 'proto/informer/v1/workqueue.proto',
        'proto/informer/v1/events.proto', 'dist/src/index.js', 'dist/src/index.d.ts']) {
        assert.ok(files.includes(f), `${f} not in the tarball: ${files.join(' ')}`);
      }
      assert.deepStrictEqual(files.filter((f) => f.startsWith('dist/test')), []);

      const app = path.join(tmp, 'app');
      fs.mkdirSync(app);
      fs.writeFileSync(path.join(app, 'package.json'),
        JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
      await run('npm', ['install', '--no-audit', '--no-fund', tarball], app, cleanEnv());
      const installed = path.join(app, 'node_modules', 'informer-sidecar');
      assert.ok(fs.existsSync(path.join(installed, 'proto', 'informer', 'v1', 'informer.proto')));
      fs.writeFileSync(path.join(app, 'app.js'), APP);

      const env = { ...cleanEnv(), INFORMER_SIDECAR_BIN: BINARY };
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn(process.execPath, ['app.js'], { cwd: app, env,
          stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d) => { stdout += d; });
        child.stderr.on('data', (d) => { stderr += d; });
        child.on('exit', (code) => (code === 0 ? resolve(stdout)
          : reject(new Error(`app exited ${code}: ${stdout}\n${stderr}`))));
      });
      const result = JSON.parse(out.trim().split('\n').pop()!);
      assert.strictEqual(fs.realpathSync(result.protoDir), fs.realpathSync(path.join(installed, 'proto')));
      // The seed: 5 pods in demo (one replaced every second: 7 or 8 in
      // all at any moment), 3 in shop.
      assert.ok(result.keys.length === 7 || result.keys.length === 8, JSON.stringify(result.keys));
      assert.strictEqual(result.shop, 3);

      // The README's quick start, as printed, against a demo sidecar.
      const readme = fs.readFileSync(path.join(PACKAGE, 'README.md'), 'utf8');
      const quick = /## Quick start[\s\S]*?```js\n([\s\S]*?)```/.exec(readme);
      assert.ok(quick, 'README.md: no js block under "## Quick start"');
      fs.writeFileSync(path.join(app, 'quickstart.js'), quick[1]);
      const sidecar = await new DemoSidecar(BINARY).start();
      try {
        const qs = await run(process.execPath, ['quickstart.js', sidecar.target], app,
          cleanEnv(), 120_000);
        assert.match(qs, /'demo\/[a-z0-9.-]+'/);
      } finally {
        await sidecar.close();
      }
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
