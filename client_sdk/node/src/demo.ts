// Runs the sidecar binary in demo mode as a child process (examples, tests).
//
// The demo cluster is the sidecar's in-process API server emulator, seeded
// with namespaces, pods, deployments and configmaps that change every
// second.
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as grpc from '@grpc/grpc-js';

import { informerV1 } from './proto';

/** Resolves when `cond()` holds, polling every `everyMs`; rejects with
 * `what` after `timeoutMs`. */
export async function pollUntil(cond: () => boolean, timeoutMs: number, what: string,
  everyMs = 20): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * An `informer_sidecar --demo` child serving gRPC on a loopback port it
 * picks itself (port 0, read back from --ports_file).
 *
 *     const sidecar = await new DemoSidecar('bazel-bin/server/informer_sidecar').start();
 *     new RemoteInformer('pods', { target: sidecar.target }) ...
 *     await sidecar.close();
 *
 * restart() stops the process and starts a new one (a new run, on a new
 * port: Watch resume tokens of the old run get RESET). Not for concurrent
 * use.
 */
export class DemoSidecar {
  readonly binary: string;
  readonly dir: string;
  readonly logPath: string;
  private readonly extraArgs: string[];
  private proc: ChildProcess | null = null;
  private exited: { code: number | null; signal: string | null } | null = null;
  /** "127.0.0.1:PORT" of the running child. */
  target = '';
  /** The gRPC and HTTP ports of the running child. */
  grpcPort = 0;
  httpPort = 0;

  constructor(binary: string, extraArgs: string[] = []) {
    if (!fs.existsSync(binary)) {
      throw new Error(`binary: ${binary} not found (build it: bazel build //server:informer_sidecar)`);
    }
    this.binary = binary;
    this.extraArgs = extraArgs;
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'isd-node-'));
    this.logPath = path.join(this.dir, 'sidecar.log');
  }

  /** Starts the child and resolves once its gRPC port accepts calls. */
  async start(timeoutMs = 60_000): Promise<this> {
    if (this.proc) throw new Error('already running');
    const portsFile = path.join(this.dir, 'ports');
    fs.rmSync(portsFile, { force: true });
    const log = fs.openSync(this.logPath, 'a');
    const proc = spawn(this.binary, [
      '--demo', '--grpc_listen=127.0.0.1:0', '--http_listen=127.0.0.1:0',
      `--ports_file=${portsFile}`, '--print_events=false', ...this.extraArgs,
    ], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    this.proc = proc;
    this.exited = null;
    proc.on('exit', (code, signal) => {
      this.exited = { code, signal };
    });
    try {
      // The sidecar writes the file (atomically, by rename) once bound.
      await pollUntil(() => this.exited !== null || fs.existsSync(portsFile), timeoutMs,
        `sidecar wrote no ${portsFile}; log: ${this.logPath}`);
      if (this.exited) throw new Error(`sidecar exited (${JSON.stringify(this.exited)}); log: ${this.logPath}`);
      const ports = Object.fromEntries(fs.readFileSync(portsFile, 'utf8').trim().split('\n')
        .map((l) => l.split('=')));
      this.grpcPort = Number(ports.grpc);
      this.httpPort = Number(ports.http);
      if (!(this.grpcPort > 0)) throw new Error(`bad ports file: ${JSON.stringify(ports)}`);
      this.target = `127.0.0.1:${this.grpcPort}`;
      await this.waitReady(timeoutMs);
    } catch (e) {
      await this.stop();
      throw e;
    }
    return this;
  }

  private waitReady(timeoutMs: number): Promise<void> {
    const client = new (informerV1().Informer)(this.target, grpc.credentials.createInsecure());
    return new Promise<void>((resolve, reject) => {
      client.waitForReady(Date.now() + timeoutMs, (err?: Error) => {
        client.close();
        if (err) reject(new Error(`sidecar not serving on ${this.target}: ${err.message}`));
        else resolve();
      });
    });
  }

  /** SIGTERM, then SIGKILL after `timeoutMs`; resolves once it exited. */
  async stop(timeoutMs = 30_000): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    if (this.exited === null) {
      proc.kill('SIGTERM');
      try {
        await pollUntil(() => this.exited !== null, timeoutMs, 'sidecar exit after SIGTERM');
      } catch {
        proc.kill('SIGKILL');
        await pollUntil(() => this.exited !== null, timeoutMs, 'sidecar exit after SIGKILL');
      }
    }
    this.proc = null;
  }

  /** Stops the child and starts a new one (a new run, on a new port). */
  async restart(timeoutMs = 60_000): Promise<void> {
    await this.stop();
    await this.start(timeoutMs);
  }

  /** Stops the child and removes its directory (and log). */
  async close(): Promise<void> {
    await this.stop();
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
