// Loading of the sidecar's protos and construction of gRPC clients, shared
// by the SDK's modules.
import * as fs from 'fs';
import * as path from 'path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

import { SidecarError } from './errors';

/** The sidecar's default gRPC address (its --grpc_listen default). */
export const DEFAULT_TARGET = '127.0.0.1:50051';

/** How every SDK entry point reaches the sidecar. */
export interface ConnectionOptions {
  /** The sidecar: "host:port" or "unix:/path". Default 127.0.0.1:50051.
   * Unused with `channel`. */
  target?: string;
  /** Channel credentials. Default: insecure (plaintext), as the sidecar
   * listens on loopback or a unix socket by default. */
  credentials?: grpc.ChannelCredentials;
  /** An existing grpc-js Channel to use; the SDK never closes it. */
  channel?: grpc.Channel;
  /** Metadata for every call, e.g. `{ authorization: 'Bearer TOKEN' }`. */
  metadata?: Record<string, string> | grpc.Metadata;
}

/** The Duration message as proto-loader takes it. */
export interface DurationMsg {
  seconds: string;
  nanos: number;
}

/** Milliseconds as a google.protobuf.Duration; `field` names the option in
 * the error thrown for a bad value. */
export function durationMs(ms: number, field: string): DurationMsg {
  if (!Number.isFinite(ms) || ms < 0) {
    throw new RangeError(`${field}: must be a non-negative number of milliseconds`);
  }
  const whole = Math.floor(ms / 1000);
  return { seconds: String(whole), nanos: Math.round((ms - whole * 1000) * 1e6) };
}

/** A google.protobuf.Duration (as proto-loader gives it) in milliseconds. */
export function durationToMs(d: { seconds?: string | number; nanos?: number } | null | undefined): number {
  if (!d) return 0;
  return Number(d.seconds ?? 0) * 1000 + (d.nanos ?? 0) / 1e6;
}

const PROTO_FILES = [
  'informer/v1/informer.proto',
  'informer/v1/workqueue.proto',
  'informer/v1/events.proto',
];

/**
 * Where the .proto files are: $INFORMER_SIDECAR_PROTO_DIR if set (a
 * directory holding informer/v1/*.proto), else the package's own proto/
 * directory, which its `prepare` script fills from the repository
 * (scripts/copy-protos.js) and `npm pack` ships. The compiled files are in
 * <package>/dist/src, hence the two levels up.
 */
export function protoDir(): string {
  const fromEnv = process.env.INFORMER_SIDECAR_PROTO_DIR;
  const dir = fromEnv || path.resolve(__dirname, '..', '..', 'proto');
  if (!fs.existsSync(path.join(dir, PROTO_FILES[0]))) {
    throw new Error(
      `informer-sidecar: ${PROTO_FILES[0]} not found under ${dir}; ` +
        (fromEnv ? 'INFORMER_SIDECAR_PROTO_DIR names no proto directory'
          : 'the package was built without its protos (run `npm run build` in ' +
            'client_sdk/node of the repository, or install the packed tarball)'));
  }
  return dir;
}

// Loaded once, on first use.
let loaded: any = null;

/** The informer.v1 package (service constructors) of grpc-js. */
export function informerV1(): any {
  if (loaded === null) {
    const definition = protoLoader.loadSync(PROTO_FILES, {
      includeDirs: [protoDir()],
      // camelCase field names; 64-bit integers as decimal strings (lease ids
      // are uint64: a JS number would round them above 2^53); enums by name;
      // every field present with its default; `body` names the oneof set.
      keepCase: false,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    });
    loaded = (grpc.loadPackageDefinition(definition) as any).informer.v1;
  }
  return loaded;
}

// The channel's own reconnect pacing: short, so that a restarted sidecar is
// found again quickly; the SDK's callers add their own back-off on top. The
// message size limits stay gRPC's defaults (4 MiB to receive): the sidecar
// keeps its messages under them.
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 5000,
};

/** A client of `service` ("Informer", "WorkQueue", "Events") per `opts`. */
export function makeClient(service: string, opts: ConnectionOptions): grpc.Client {
  const Ctor = informerV1()[service];
  const creds = opts.credentials ?? grpc.credentials.createInsecure();
  if (opts.channel) {
    return new Ctor('unused', creds, { channelOverride: opts.channel });
  }
  const target = opts.target ?? DEFAULT_TARGET;
  if (!target) throw new RangeError("target: must be 'host:port' or 'unix:/path'");
  return new Ctor(target, creds, CHANNEL_OPTIONS);
}

/** Closes a client made by makeClient unless its channel is the caller's. */
export function closeClient(client: grpc.Client, opts: ConnectionOptions): void {
  if (!opts.channel) client.close();
}

/** The call metadata of `opts` (a fresh object per call). */
export function callMetadata(opts: ConnectionOptions, waitForReady = false): grpc.Metadata {
  const md = new grpc.Metadata(waitForReady ? { waitForReady: true } : undefined);
  if (opts.metadata instanceof grpc.Metadata) {
    md.merge(opts.metadata);
  } else if (opts.metadata) {
    for (const [k, v] of Object.entries(opts.metadata)) md.set(k, v);
  }
  return md;
}

/** Calls unary `method` of `client` and resolves with its response, or
 * rejects with a SidecarError. `timeoutMs` <= 0 or undefined: no deadline. */
export function unary<Res>(
  client: grpc.Client,
  method: string,
  request: object,
  opts: ConnectionOptions,
  timeoutMs?: number,
): Promise<Res> {
  const options: grpc.CallOptions = {};
  if (timeoutMs !== undefined && timeoutMs > 0) options.deadline = Date.now() + timeoutMs;
  return new Promise<Res>((resolve, reject) => {
    (client as any)[method](request, callMetadata(opts), options, (err: unknown, res: Res) => {
      if (err) reject(SidecarError.from(err));
      else resolve(res);
    });
  });
}

/** Runs `fn` with a client of `service`, closing it afterwards if it owns
 * its channel. */
export async function withClient<T>(
  service: string,
  opts: ConnectionOptions,
  fn: (client: grpc.Client) => Promise<T>,
): Promise<T> {
  const client = makeClient(service, opts);
  try {
    return await fn(client);
  } finally {
    closeClient(client, opts);
  }
}

/** Where the SDK logs: console by default (warn for failing streams). */
export interface Logger {
  info(message: string): void;
  warn(message: string): void;
}

/** The default logger: stream failures as console.warn lines, nothing else
 * (set INFORMER_SIDECAR_DEBUG=1 for the informational lines). */
export const defaultLogger: Logger = {
  info: (m) => {
    if (process.env.INFORMER_SIDECAR_DEBUG) console.info(m);
  },
  warn: (m) => console.warn(m),
};
