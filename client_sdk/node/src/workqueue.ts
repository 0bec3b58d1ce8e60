// Workers of the sidecar's remote work queues (informer.v1.WorkQueue).
//
// A queue is declared with createQueue(); the sidecar enqueues the key of
// every matching object as its informer sees changes. A WorkQueueWorker
// holds a Lease stream, runs fn(key, lease) for every key leased to it, at
// most `credit` at once, and reports each lease: FORGET when fn succeeds,
// FAIL (retried by the sidecar after the queue's rate-limited back-off) when
// it throws or its promise rejects.
import { EventEmitter } from 'events';
import * as grpc from '@grpc/grpc-js';

import { SidecarError } from './errors';
import {
  ConnectionOptions, Logger, callMetadata, closeClient, defaultLogger, durationMs, durationToMs, makeClient,
  unary, withClient,
} from './proto';

const EVENTS: Record<string, string> = {
  added: 'QUEUE_EVENT_ADDED',
  modified: 'QUEUE_EVENT_MODIFIED',
  deleted: 'QUEUE_EVENT_DELETED',
  sync: 'QUEUE_EVENT_SYNC',
};

export interface CallOptions extends ConnectionOptions {
  /** Deadline in milliseconds (0: none). Default 10 s. */
  timeoutMs?: number;
}

export interface CreateQueueOptions extends CallOptions {
  /** Only objects of this namespace (default: all). */
  namespace?: string;
  /** Kubernetes label selector (default: every object). */
  labelSelector?: string;
  /** Which informer events enqueue a key (default: all four). */
  events?: Array<'added' | 'modified' | 'deleted' | 'sync'>;
  /** Enqueue every matching key periodically (needs 'sync' in events). */
  resyncPeriodMs?: number;
  /** Retry pacing of failed keys (defaults: client-go's 5 ms, 1000 s,
   * 10/s, 100). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  qps?: number;
  burst?: number;
  /** How long a worker may hold a key (default: 5 minutes). */
  leaseTimeoutMs?: number;
}

function timeout(opts: CallOptions): number {
  return opts.timeoutMs ?? 10_000;
}

/**
 * Declares queue `name` fed by the informer of `resource`. Idempotent:
 * resolves true if this call created it, false if an identical queue
 * existed (a different declaration rejects with ALREADY_EXISTS).
 */
export async function createQueue(name: string, resource: string,
  opts: CreateQueueOptions = {}): Promise<boolean> {
  const request: Record<string, unknown> = {
    name,
    resource,
    namespace: opts.namespace ?? '',
    labelSelector: opts.labelSelector ?? '',
    events: (opts.events ?? []).map((e) => {
      if (!(e in EVENTS)) {
        throw new RangeError(`events: unknown event ${JSON.stringify(e)} (want one of ` +
          `${Object.keys(EVENTS).sort().join(', ')})`);
      }
      return EVENTS[e];
    }),
  };
  if (opts.resyncPeriodMs !== undefined) {
    request.resyncPeriod = durationMs(opts.resyncPeriodMs, 'resyncPeriodMs');
  }
  if (opts.leaseTimeoutMs !== undefined) {
    request.leaseTimeout = durationMs(opts.leaseTimeoutMs, 'leaseTimeoutMs');
  }
  if ([opts.baseDelayMs, opts.maxDelayMs, opts.qps, opts.burst].some((v) => v !== undefined)) {
    const rl: Record<string, unknown> = {};
    if (opts.baseDelayMs !== undefined) rl.baseDelay = durationMs(opts.baseDelayMs, 'baseDelayMs');
    if (opts.maxDelayMs !== undefined) rl.maxDelay = durationMs(opts.maxDelayMs, 'maxDelayMs');
    if (opts.qps !== undefined) rl.qps = opts.qps;
    if (opts.burst !== undefined) rl.burst = opts.burst;
    request.rateLimiter = rl;
  }
  const r = await withClient('WorkQueue', opts, (c) =>
    unary<{ created: boolean }>(c, 'CreateQueue', request, opts, timeout(opts)));
  return r.created;
}

/** Removes queue `name` (its Lease streams end with NOT_FOUND). */
export async function deleteQueue(name: string, opts: CallOptions = {}): Promise<void> {
  await withClient('WorkQueue', opts, (c) => unary(c, 'DeleteQueue', { name }, opts, timeout(opts)));
}

/** Adds `key` to `queue` now or after `delayMs`. */
export async function addAfter(queue: string, key: string, delayMs = 0,
  opts: CallOptions = {}): Promise<void> {
  const request: Record<string, unknown> = { queue, key };
  if (delayMs > 0) request.delay = durationMs(delayMs, 'delayMs');
  await withClient('WorkQueue', opts, (c) => unary(c, 'AddAfter', request, opts, timeout(opts)));
}

/** Resets the failure count (back-off) of `key` in `queue`. */
export async function forget(queue: string, key: string, opts: CallOptions = {}): Promise<void> {
  await withClient('WorkQueue', opts, (c) => unary(c, 'Forget', { queue, key }, opts, timeout(opts)));
}

/** Statistics of one queue. */
export interface QueueStats {
  name: string;
  resource: string;
  depth: number;
  waiting: number;
  inFlight: number;
  workers: number;
  adds: number;
  retries: number;
  failures: number;
  expired: number;
  returned: number;
  completed: number;
}

/** Stats of one queue (or of every queue with ''), sorted by name. */
export async function queueStats(queue = '', opts: CallOptions = {}): Promise<QueueStats[]> {
  const r = await withClient('WorkQueue', opts, (c) =>
    unary<{ queues: any[] }>(c, 'Stats', { queue }, opts, timeout(opts)));
  return r.queues.map((q) => ({
    name: q.name,
    resource: q.resource,
    depth: Number(q.depth),
    waiting: Number(q.waiting),
    inFlight: Number(q.inFlight),
    workers: Number(q.workers),
    adds: Number(q.adds),
    retries: Number(q.retries),
    failures: Number(q.failures),
    expired: Number(q.expired),
    returned: Number(q.returned),
    completed: Number(q.completed),
  }));
}

/** One key leased to a worker. */
export interface Lease {
  /** The lease id (a uint64 as a decimal string, exact). */
  leaseId: string;
  /** "namespace/name", or "name" for cluster-scoped objects. */
  key: string;
  namespace: string;
  name: string;
  /** How many times this key failed since it was last forgotten. */
  failures: number;
  /** Time left to complete the lease before it returns to the queue. */
  timeoutMs: number;
}

export interface WorkQueueWorkerOptions extends ConnectionOptions {
  /** Keys processed at once. Default 1. */
  credit?: number;
  /** This worker's name in the sidecar's logs and Stats. */
  name?: string;
  /** Reconnect delays (doubling, with jitter). Defaults 100 ms and 30 s. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Called with every failure of the Lease stream (as is 'error'), with
   * the count of consecutive failures. */
  onError?: (err: SidecarError, failures: number) => void;
  /** Called once when a stream delivers again after `failures` failed
   * ones (as is 'recovered'). */
  onRecovered?: (failures: number) => void;
  /** Where failures are logged (warn). Default: console. */
  logger?: Logger;
}

type LeaseStream = grpc.ClientDuplexStream<object, {
  leases: any[]; rejected: any[]; expiredLeaseIds: string[];
}>;

/**
 * Runs `fn(key, lease)` for the keys a remote work queue leases to it.
 *
 * Up to `credit` keys are processed at once. When fn returns (or its promise
 * resolves) the lease is reported FORGET (done, back-off reset); when it
 * throws or rejects, FAIL (the sidecar retries the key after its
 * rate-limited back-off; `lease.failures` grows). A lease the sidecar
 * reports expired is not reported (its key was given back to the queue);
 * fn is not interrupted, but isExpired(leaseId) tells it.
 *
 * The Lease stream reconnects by itself with exponential back-off; keys
 * leased on a broken stream return to the queue on the sidecar's side, and
 * their results are dropped. Stream failures are logged (warn) and passed
 * to `onError` and the 'error' listeners (if any) as SidecarErrors, every
 * code retried (a queue may be declared after its workers start); the
 * first stream that delivers after failures is reported once to
 * `onRecovered` and the 'recovered' listeners.
 */
export class WorkQueueWorker extends EventEmitter {
  readonly queue: string;
  private readonly fn: (key: string, lease: Lease) => unknown;
  private readonly opts: WorkQueueWorkerOptions;
  private readonly credit: number;
  private readonly logger: Logger;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;

  private client: grpc.Client | null = null;
  private call: LeaseStream | null = null;
  private generation = 0; // of the current stream
  private busy = 0; // fn calls running
  private readonly running = new Set<Promise<void>>();
  private expired = new Set<string>();
  private processedCount = 0;
  private failedCount = 0;
  private rejectedCount = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private delayMs: number;
  private lastLogged = '';
  private failureCount = 0;
  private started = false;
  private stopped = false;
  private waiters: Array<{ predicate: (w: WorkQueueWorker) => boolean; resolve: (ok: boolean) => void;
    timer?: NodeJS.Timeout }> = [];

  constructor(queue: string, fn: (key: string, lease: Lease) => unknown,
    opts: WorkQueueWorkerOptions = {}) {
    super();
    if (!queue) throw new RangeError('queue: required');
    if (typeof fn !== 'function') throw new TypeError('fn: must be a function');
    const credit = opts.credit ?? 1;
    if (!Number.isInteger(credit) || credit < 1) throw new RangeError('credit: must be an integer >= 1');
    this.queue = queue;
    this.fn = fn;
    this.opts = opts;
    this.credit = credit;
    this.logger = opts.logger ?? defaultLogger;
    this.initialBackoffMs = opts.initialBackoffMs ?? 100;
    this.maxBackoffMs = opts.maxBackoffMs ?? 30_000;
    if (!(this.initialBackoffMs > 0) || !(this.maxBackoffMs >= this.initialBackoffMs)) {
      throw new RangeError('initialBackoffMs/maxBackoffMs: need 0 < initial <= max');
    }
    this.delayMs = this.initialBackoffMs;
  }

  /** Opens the Lease stream (in the background). Returns this. */
  start(): this {
    if (this.started) throw new Error('WorkQueueWorker already started');
    this.started = true;
    this.client = makeClient('WorkQueue', this.opts);
    this.connect();
    return this;
  }

  /** Ends the stream (unfinished leases return to the queue), waits for the
   * running fn calls, closes the channel (unless the caller's). */
  async stop(): Promise<void> {
    if (!this.stopped) {
      this.stopped = true;
      if (this.retryTimer) clearTimeout(this.retryTimer);
      const call = this.call;
      this.call = null;
      call?.cancel();
      for (const w of this.waiters.splice(0)) {
        if (w.timer) clearTimeout(w.timer);
        w.resolve(w.predicate(this));
      }
    }
    await Promise.all([...this.running]);
    if (this.client) closeClient(this.client, this.opts);
    this.client = null;
  }

  /** Leases reported FORGET (fn succeeded). */
  get processed(): number {
    return this.processedCount;
  }

  /** Leases reported FAIL (fn failed). */
  get failed(): number {
    return this.failedCount;
  }

  /** Results the sidecar rejected (e.g. the lease had expired). */
  get rejected(): number {
    return this.rejectedCount;
  }

  /** True if the sidecar took lease `leaseId` back (timed out). */
  isExpired(leaseId: string): boolean {
    return this.expired.has(leaseId);
  }

  /** Resolves true once predicate(this) holds (re-evaluated after every
   * finished lease), false after `timeoutMs`. */
  waitFor(predicate: (w: WorkQueueWorker) => boolean, timeoutMs?: number): Promise<boolean> {
    if (predicate(this)) return Promise.resolve(true);
    if (this.stopped) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter: (typeof this.waiters)[number] = { predicate, resolve };
      if (timeoutMs !== undefined) {
        waiter.timer = setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve(predicate(this));
        }, Math.max(0, timeoutMs));
      }
      this.waiters.push(waiter);
    });
  }

  private notify(): void {
    const done = this.waiters.filter((w) => w.predicate(this));
    if (done.length === 0) return;
    this.waiters = this.waiters.filter((w) => !done.includes(w));
    for (const w of done) {
      if (w.timer) clearTimeout(w.timer);
      w.resolve(true);
    }
  }

  private connect(): void {
    this.retryTimer = null;
    if (this.stopped || !this.client) return;
    const generation = ++this.generation;
    this.expired.clear();
    const call = (this.client as any).Lease(callMetadata(this.opts)) as LeaseStream;
    this.call = call;
    let got = false;
    let ended = false;
    const finish = (err: SidecarError | null) => {
      if (ended) return;
      ended = true;
      if (this.call !== call) return; // stopped
      this.call = null;
      this.onStreamEnd(err, got);
    };
    call.on('data', (response) => {
      if (this.call !== call) return;
      got = true;
      if (this.failureCount > 0) this.recovered();
      this.onResponse(response, generation);
    });
    call.on('error', (err) => finish(SidecarError.from(err)));
    call.on('status', (status: grpc.StatusObject) =>
      finish(status.code === grpc.status.OK ? null : SidecarError.from(status)));
    call.write({ queue: this.queue, credit: this.credit - this.busy, worker: this.opts.name ?? '' });
  }

  /** Consecutive failed Lease streams; 0 while the stream works. */
  get failures(): number {
    return this.failureCount;
  }

  private recovered(): void {
    const failures = this.failureCount;
    this.failureCount = 0;
    this.delayMs = this.initialBackoffMs;
    this.lastLogged = '';
    this.logger.warn(`WorkQueueWorker(${this.queue}): lease stream works again after ${failures} failed attempt(s)`);
    try {
      this.opts.onRecovered?.(failures);
      for (const l of this.listeners('recovered')) (l as (n: number) => void)(failures);
    } catch (e) {
      this.logger.warn(`WorkQueueWorker(${this.queue}): a recovery handler threw: ${e}`);
    }
  }

  private onStreamEnd(ended: SidecarError | null, got: boolean): void {
    if (this.stopped) return;
    // An end without an error is reported too (code OK), as the other SDKs
    // do: the worker reconnects all the same.
    const err = ended ?? new SidecarError(grpc.status.OK, 'the sidecar ended the stream');
    this.failureCount++;
    if (got) {
      // The stream worked: back-off and log suppression start over.
      this.delayMs = this.initialBackoffMs;
      this.lastLogged = '';
    }
    const what = err.message;
    if (what !== this.lastLogged) {
      // The same failure again in a row (e.g. while the sidecar is down) is
      // logged once; every failure still reaches onError and 'error'.
      this.logger.warn(`WorkQueueWorker(${this.queue}): lease stream: ${what} (reconnecting with back-off)`);
      this.lastLogged = what;
    }
    try {
      this.opts.onError?.(err, this.failureCount);
      for (const l of this.listeners('error')) (l as (e: SidecarError, n: number) => void)(err, this.failureCount);
    } catch (e) {
      this.logger.warn(`WorkQueueWorker(${this.queue}): an error handler threw: ${e}`);
    }
    if (this.stopped) return;
    const delay = this.delayMs * (0.5 + Math.random() / 2);
    this.delayMs = Math.min(this.delayMs * 2, this.maxBackoffMs);
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  private onResponse(response: { leases: any[]; rejected: any[]; expiredLeaseIds: string[] },
    generation: number): void {
    for (const id of response.expiredLeaseIds) this.expired.add(String(id));
    this.rejectedCount += response.rejected.length;
    for (const r of response.rejected) {
      this.logger.warn(`WorkQueueWorker(${this.queue}): result of lease ${r.leaseId} rejected: ${r.message}`);
    }
    for (const l of response.leases) {
      const lease: Lease = {
        leaseId: String(l.leaseId),
        key: l.key,
        namespace: l.namespace,
        name: l.name,
        failures: l.failures,
        timeoutMs: durationToMs(l.timeout),
      };
      this.busy++;
      const p = this.process(lease, generation);
      this.running.add(p);
      void p.finally(() => this.running.delete(p));
    }
  }

  private async process(lease: Lease, generation: number): Promise<void> {
    let outcome: 'LEASE_OUTCOME_FORGET' | 'LEASE_OUTCOME_FAIL';
    try {
      await this.fn(lease.key, lease);
      outcome = 'LEASE_OUTCOME_FORGET';
    } catch (e) {
      this.logger.warn(`WorkQueueWorker(${this.queue}): ${lease.key} failed (attempt ` +
        `${lease.failures + 1}): ${(e as Error)?.message ?? e}`);
      outcome = 'LEASE_OUTCOME_FAIL';
    }
    this.busy--;
    if (outcome === 'LEASE_OUTCOME_FORGET') this.processedCount++;
    else this.failedCount++;
    this.notify();
    if (this.call === null) {
      // Between streams (or stopped): the next stream's first credit counts
      // this free slot.
      return;
    }
    const request: { credit: number; results: object[] } = { credit: 1, results: [] };
    if (generation !== this.generation) {
      // Leased on a stream that broke: the sidecar already gave the key
      // back, so only the slot is returned.
    } else if (this.expired.has(lease.leaseId)) {
      this.expired.delete(lease.leaseId);
    } else {
      request.results.push({ leaseId: lease.leaseId, outcome });
    }
    this.call.write(request);
  }
}
