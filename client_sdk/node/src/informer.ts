// RemoteInformer: a local mirror of one resource fed by the sidecar's Watch.
//
// The sidecar streams the resource's current state, then its changes, each
// event with a resume token. RemoteInformer applies them to a local mirror
// (objects parsed from JSON), maintains local indexes on it and calls the
// registered handlers. When the stream breaks it reconnects with
// exponential back-off and resumes right after the last event it processed;
// when the sidecar cannot honour the token (e.g. it restarted) it answers
// RESET and a fresh initial state, which RemoteInformer reconciles with its
// mirror so that handlers only see the differences (adds, updates, deletes):
// never a second add of an object they already have.
import { EventEmitter } from 'events';
import * as grpc from '@grpc/grpc-js';

import { SidecarError } from './errors';
import { KubeObject, jsonEqual, objectKey } from './objects';
import { ConnectionOptions, Logger, callMetadata, closeClient, defaultLogger, makeClient } from './proto';

/** Values of one object for a local index. */
export type IndexFunc = (obj: KubeObject) => Iterable<string>;

export interface RemoteInformerOptions extends ConnectionOptions {
  /** Only objects of this namespace (default: all). */
  namespace?: string;
  /** Kubernetes label selector (default: every object). */
  labelSelector?: string;
  /** Extra local indexes, name -> function(obj) returning its values.
   * "namespace" and "label:<key>" always exist. */
  indexers?: Record<string, IndexFunc>;
  /** Start right after this token (normally left empty). */
  resumeToken?: string;
  /** Reconnect delays: from the first, doubling up to the second, with
   * jitter. Defaults 100 ms and 30 s. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Called with every stream failure (as is the 'error' event), with how
   * many failed in a row and whether it is final (see RemoteInformer). */
  onError?: (err: SidecarError, failure: StreamFailure) => void;
  /** Called once when a stream delivers again after `failures` failed
   * ones (as is the 'recovered' event). */
  onRecovered?: (failures: number) => void;
  /** Where failures are logged (warn). Default: console. */
  logger?: Logger;
}

/** What a failed stream means for the informer (second argument of
 * onError and of the 'error' listeners). */
export interface StreamFailure {
  /** Consecutive failed streams, this one included. */
  failures: number;
  /** Milliseconds until the next attempt; 0 when final. */
  retryInMs: number;
  /** True when the informer gives up: NOT_FOUND (unknown resource),
   * PERMISSION_DENIED or INVALID_ARGUMENT (bad selector), which another
   * attempt would get again. */
  final: boolean;
}

/** The codes that end a Watch for good (see StreamFailure.final). */
export const FINAL_WATCH_CODES: ReadonlySet<grpc.status> = new Set([
  grpc.status.NOT_FOUND, grpc.status.PERMISSION_DENIED, grpc.status.INVALID_ARGUMENT,
]);

type AddHandler = (obj: KubeObject, isInitial: boolean) => void;
type UpdateHandler = (oldObj: KubeObject, newObj: KubeObject) => void;
type DeleteHandler = (obj: KubeObject, tombstone: boolean) => void;
type ErrorHandler = (err: SidecarError, failure: StreamFailure) => void;
type RecoveredHandler = (failures: number) => void;

interface WatchEvent {
  type: string;
  object?: { body?: string; json?: string } | null;
  resumeToken: string;
  initial: boolean;
  tombstone: boolean;
  stale?: boolean;
}

interface Waiter {
  predicate: (inf: RemoteInformer) => boolean;
  resolve: (ok: boolean) => void;
  timer?: NodeJS.Timeout;
}

function namespaceIndex(obj: KubeObject): string[] {
  return [obj?.metadata?.namespace ?? ''];
}

function labelIndex(label: string): IndexFunc {
  return (obj) => {
    const labels = obj?.metadata?.labels ?? {};
    return Object.prototype.hasOwnProperty.call(labels, label) ? [String(labels[label])] : [];
  };
}

/**
 * A local, indexed mirror of one resource served by the sidecar.
 *
 *     const inf = new RemoteInformer('pods', { target, labelSelector: 'app=web' });
 *     inf.on('add', (obj, isInitial) => console.log('add', objectKey(obj)));
 *     inf.start();
 *     await inf.waitForSync(10_000);
 *
 * Handlers ('add'(obj, isInitial), 'update'(oldObj, newObj),
 * 'delete'(obj, tombstone)) run one at a time, in the order of the changes,
 * after the mirror was updated; a handler that throws is logged and does not
 * stop the informer (a handler returning a promise is not awaited). Register
 * them before start() to see the initial state. `tombstone` is true when the
 * delete was inferred (the sidecar relisted, or a reconnect found the object
 * gone) rather than observed; `obj` is then the last state known.
 *
 * Every stream failure is logged (logger.warn, console.warn by default) and
 * passed to `onError` and to the 'error' listeners (a SidecarError with the
 * gRPC code, and a StreamFailure); without an 'error' listener no 'error'
 * event is emitted, so a failure never throws. The informer retries with
 * exponential back-off, resuming after the last event it processed; the
 * first stream that delivers again is reported once to `onRecovered` and
 * the 'recovered' listeners. NOT_FOUND, PERMISSION_DENIED and
 * INVALID_ARGUMENT are final: reported once with `final` set, never
 * retried (the mirror keeps its content; waitForSync resolves false).
 *
 * Objects returned by get(), list(), byIndex() and passed to handlers are
 * shared with the mirror: treat them as read-only.
 */
export class RemoteInformer extends EventEmitter {
  readonly resource: string;
  private readonly opts: RemoteInformerOptions;
  private readonly logger: Logger;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;

  private readonly items = new Map<string, KubeObject>();
  private readonly indexFuncs = new Map<string, IndexFunc>();
  // index name -> value -> keys.
  private readonly indexes = new Map<string, Map<string, Set<string>>>();
  private synced = false;
  private stale = false;
  private token: string;
  private reconnectCount = 0;
  private resetCount = 0;
  private initialStateCount = 0;
  private lastErr: SidecarError | null = null;
  private failureCount = 0;
  private gaveUp = false;

  // A fresh initial state over a mirror with content, collected until
  // INITIAL_STATE_DONE and then applied as differences.
  private relisting = false;
  private relist = new Map<string, KubeObject>();

  private client: grpc.Client | null = null;
  private call: grpc.ClientReadableStream<{ events: WatchEvent[] }> | null = null;
  private retryTimer: NodeJS.Timeout | null = null;
  private started = false;
  private stopped = false;
  private delayMs: number;
  private lastLogged = '';
  private waiters: Waiter[] = [];

  constructor(resource: string, opts: RemoteInformerOptions = {}) {
    super();
    if (!resource) throw new RangeError('resource: required');
    const initial = opts.initialBackoffMs ?? 100;
    const max = opts.maxBackoffMs ?? 30_000;
    if (!(initial > 0) || !(max >= initial)) {
      throw new RangeError('initialBackoffMs/maxBackoffMs: need 0 < initial <= max');
    }
    this.resource = resource;
    this.opts = opts;
    this.logger = opts.logger ?? defaultLogger;
    this.initialBackoffMs = initial;
    this.maxBackoffMs = max;
    this.delayMs = initial;
    this.token = opts.resumeToken ?? '';
    this.indexFuncs.set('namespace', namespaceIndex);
    for (const [name, fn] of Object.entries(opts.indexers ?? {})) {
      if (typeof fn !== 'function') throw new TypeError(`indexers.${name}: must be a function`);
      this.indexFuncs.set(name, fn);
    }
    for (const name of this.indexFuncs.keys()) this.indexes.set(name, new Map());
  }

  // ----- handlers (typed overloads of EventEmitter.on) -----

  override on(event: 'add', listener: AddHandler): this;
  override on(event: 'update', listener: UpdateHandler): this;
  override on(event: 'delete', listener: DeleteHandler): this;
  override on(event: 'error', listener: ErrorHandler): this;
  override on(event: 'recovered', listener: RecoveredHandler): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.on(event, listener);
  }

  // ----- lifecycle -----

  /** Opens the Watch stream (in the background). Returns this. */
  start(): this {
    if (this.started) throw new Error('RemoteInformer already started');
    this.started = true;
    this.client = makeClient('Informer', this.opts);
    this.connect();
    return this;
  }

  /** Ends the stream, cancels any reconnect and closes the channel (unless
   * it is the caller's). Pending waitFor() calls resolve with their
   * predicate's current value. Idempotent. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    const call = this.call;
    this.call = null;
    call?.cancel();
    if (this.client) closeClient(this.client, this.opts);
    this.client = null;
    for (const w of this.waiters.splice(0)) {
      if (w.timer) clearTimeout(w.timer);
      w.resolve(this.evaluate(w.predicate));
    }
  }

  // ----- state -----

  /** True once the initial state was received completely. */
  hasSynced(): boolean {
    return this.synced;
  }

  /** True while the sidecar serves stale data: it started from its disk
   * cache (--serve_stale_on_start) and has not reached the API server yet.
   * Set by a stale INITIAL_STATE_DONE, cleared by FRESH (or a fresh
   * INITIAL_STATE_DONE). The mirror is usable meanwhile; the changes since
   * the cache arrive as ordinary events. */
  isStale(): boolean {
    return this.stale;
  }

  /** Resolves true once hasSynced(), false after `timeoutMs`. */
  waitForSync(timeoutMs?: number): Promise<boolean> {
    return this.waitFor((inf) => inf.hasSynced(), timeoutMs);
  }

  /** Resolves true once predicate(this) holds (re-evaluated after every
   * change of the mirror or of the informer's state), false after
   * `timeoutMs` (undefined: no limit). */
  waitFor(predicate: (inf: RemoteInformer) => boolean, timeoutMs?: number): Promise<boolean> {
    if (this.evaluate(predicate)) return Promise.resolve(true);
    if (this.stopped || this.gaveUp) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      const waiter: Waiter = { predicate, resolve };
      if (timeoutMs !== undefined) {
        waiter.timer = setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          resolve(this.evaluate(predicate));
        }, Math.max(0, timeoutMs));
      }
      this.waiters.push(waiter);
    });
  }

  /** The token of the last event processed. */
  get resumeToken(): string {
    return this.token;
  }

  /** How many times the stream was re-established. */
  get reconnects(): number {
    return this.reconnectCount;
  }

  /** How many RESETs the sidecar sent (each followed by a reconciliation). */
  get resets(): number {
    return this.resetCount;
  }

  /** How many complete initial states (INITIAL_STATE_DONE) arrived: 1 after
   * the first sync; a resumed stream sends none. */
  get initialStates(): number {
    return this.initialStateCount;
  }

  /** The error that ended the last stream, or null. */
  get lastError(): SidecarError | null {
    return this.lastErr;
  }

  /** Consecutive failed streams; 0 while the stream works. */
  get failures(): number {
    return this.failureCount;
  }

  /** True once a final error ended the informer's stream for good. */
  get gaveUpOnError(): boolean {
    return this.gaveUp;
  }

  // ----- queries on the mirror -----

  /** The mirrored object, or undefined (namespace '' for cluster-scoped). */
  get(namespace: string | null | undefined, name: string): KubeObject | undefined {
    return this.items.get(namespace ? `${namespace}/${name}` : name);
  }

  /** The mirrored object with key "namespace/name" (or "name"). */
  getByKey(key: string): KubeObject | undefined {
    return this.items.get(key);
  }

  /** Every mirrored object, in key order. */
  list(): KubeObject[] {
    return this.keys().map((k) => this.items.get(k)!);
  }

  /** Every mirrored key, sorted. */
  keys(): string[] {
    return [...this.items.keys()].sort();
  }

  /** Mirrored objects indexed under `value` by index `indexName`
   * ("namespace", "label:<key>" or one of `indexers`), in key order. Throws
   * RangeError for an unknown index. */
  byIndex(indexName: string, value: string): KubeObject[] {
    const index = this.ensureIndex(indexName);
    return [...(index.get(value) ?? [])].sort().map((k) => this.items.get(k)!);
  }

  /** The values index `indexName` currently holds objects under, sorted. */
  indexValues(indexName: string): string[] {
    return [...this.ensureIndex(indexName).keys()].sort();
  }

  // ----- the mirror -----

  private evaluate(predicate: (inf: RemoteInformer) => boolean): boolean {
    try {
      return Boolean(predicate(this));
    } catch (e) {
      this.logger.warn(`RemoteInformer(${this.resource}): waitFor predicate threw: ${e}`);
      return false;
    }
  }

  private notify(): void {
    if (this.waiters.length === 0) return;
    const done = this.waiters.filter((w) => this.evaluate(w.predicate));
    if (done.length === 0) return;
    this.waiters = this.waiters.filter((w) => !done.includes(w));
    for (const w of done) {
      if (w.timer) clearTimeout(w.timer);
      w.resolve(true);
    }
  }

  private ensureIndex(name: string): Map<string, Set<string>> {
    const have = this.indexes.get(name);
    if (have) return have;
    if (!name.startsWith('label:') || name.length === 'label:'.length) {
      throw new RangeError(
        `indexName: unknown index ${JSON.stringify(name)} (have ` +
          `${[...this.indexFuncs.keys()].sort().join(', ')} and label:<key>)`);
    }
    this.indexFuncs.set(name, labelIndex(name.slice('label:'.length)));
    const index = new Map<string, Set<string>>();
    this.indexes.set(name, index);
    for (const [key, obj] of this.items) this.indexObj(name, key, obj);
    return index;
  }

  private indexObj(name: string, key: string, obj: KubeObject): void {
    const index = this.indexes.get(name)!;
    for (const value of this.indexFuncs.get(name)!(obj)) {
      let keys = index.get(value);
      if (!keys) index.set(value, (keys = new Set()));
      keys.add(key);
    }
  }

  private unindexObj(name: string, key: string, obj: KubeObject): void {
    const index = this.indexes.get(name)!;
    for (const value of this.indexFuncs.get(name)!(obj)) {
      const keys = index.get(value);
      if (keys) {
        keys.delete(key);
        if (keys.size === 0) index.delete(value);
      }
    }
  }

  private put(key: string, obj: KubeObject): KubeObject | undefined {
    const old = this.items.get(key);
    if (old !== undefined) for (const name of this.indexes.keys()) this.unindexObj(name, key, old);
    this.items.set(key, obj);
    for (const name of this.indexes.keys()) this.indexObj(name, key, obj);
    return old;
  }

  private pop(key: string): KubeObject | undefined {
    const old = this.items.get(key);
    if (old !== undefined) {
      this.items.delete(key);
      for (const name of this.indexes.keys()) this.unindexObj(name, key, old);
    }
    return old;
  }

  // ----- the stream -----

  private connect(): void {
    this.retryTimer = null;
    if (this.stopped || !this.client) return;
    const request = {
      resource: this.resource,
      namespace: this.opts.namespace ?? '',
      labelSelector: this.opts.labelSelector ?? '',
      resumeToken: this.token,
      encoding: 'ENCODING_JSON',
    };
    // Not wait-for-ready: while the sidecar is unreachable every attempt
    // fails fast with UNAVAILABLE, so the outage is reported (and retried
    // with back-off) instead of hanging in silence.
    const call = (this.client as any).Watch(request, callMetadata(this.opts)) as
      grpc.ClientReadableStream<{ events: WatchEvent[] }>;
    this.call = call;
    let gotEvent = false;
    let ended = false;
    const finish = (err: SidecarError | null) => {
      if (ended) return;
      ended = true;
      if (this.call !== call) return; // stopped, or replaced after a bad event
      this.call = null;
      this.onStreamEnd(err, gotEvent);
    };
    call.on('data', (response: { events: WatchEvent[] }) => {
      if (this.call !== call) return; // a cancelled call's leftovers
      if (this.failureCount > 0) this.recovered();
      for (const event of response.events) {
        try {
          this.apply(event);
        } catch (e) {
          // Ends this stream: the next one resumes after the last event
          // applied, so nothing is skipped.
          finish(new SidecarError(grpc.status.INTERNAL,
            `cannot apply a ${event.type} event: ${(e as Error).message ?? e}`));
          call.cancel();
          return;
        }
        gotEvent = true;
        if (this.call !== call) return; // stop() from a handler
      }
    });
    call.on('error', (err) => finish(SidecarError.from(err)));
    call.on('status', (status: grpc.StatusObject) => {
      finish(status.code === grpc.status.OK ? null : SidecarError.from(status));
    });
  }

  private recovered(): void {
    const failures = this.failureCount;
    this.failureCount = 0;
    this.delayMs = this.initialBackoffMs;
    this.lastLogged = '';
    this.logger.warn(`RemoteInformer(${this.resource}): Watch stream works again after ${failures} failed attempt(s)`);
    this.safe(() => this.opts.onRecovered?.(failures));
    for (const l of this.listeners('recovered')) this.safe(() => (l as RecoveredHandler)(failures));
  }

  private onStreamEnd(ended: SidecarError | null, gotEvent: boolean): void {
    // An end without an error is reported too (code OK), as the other SDKs
    // do: the informer reconnects all the same.
    const err = ended ?? new SidecarError(grpc.status.OK, 'the sidecar ended the stream');
    this.lastErr = err;
    if (this.stopped) return;
    if (gotEvent) {
      // The stream worked: back-off and log suppression start over.
      this.delayMs = this.initialBackoffMs;
      this.lastLogged = '';
    }
    this.failureCount++;
    const final = FINAL_WATCH_CODES.has(err.code);
    // Exponential back-off with jitter.
    const delay = final ? 0 : this.delayMs * (0.5 + Math.random() / 2);
    const what = err.message;
    if (final) {
      this.logger.warn(`RemoteInformer(${this.resource}): ${what} (final: not retried)`);
    } else if (what !== this.lastLogged) {
      // The same failure again in a row (e.g. while the sidecar is down) is
      // logged once; every failure still reaches onError and 'error'.
      this.logger.warn(`RemoteInformer(${this.resource}): ${what} (retrying with back-off)`);
      this.lastLogged = what;
    }
    if (final) this.gaveUp = true;
    const failure: StreamFailure = { failures: this.failureCount, retryInMs: delay, final };
    this.safe(() => this.opts.onError?.(err, failure));
    if (this.listenerCount('error') > 0) {
      for (const l of this.listeners('error')) this.safe(() => (l as ErrorHandler)(err, failure));
    }
    this.notify();
    if (this.stopped) return; // stopped by an error handler
    if (final) {
      // Given up: pending waits end with their predicate's current value.
      for (const w of this.waiters.splice(0)) {
        if (w.timer) clearTimeout(w.timer);
        w.resolve(this.evaluate(w.predicate));
      }
      return;
    }
    this.delayMs = Math.min(this.delayMs * 2, this.maxBackoffMs);
    this.retryTimer = setTimeout(() => {
      this.reconnectCount++;
      this.connect();
    }, delay);
  }

  /** Applies one Watch event to the mirror and calls the handlers. */
  private apply(event: WatchEvent): void {
    switch (event.type) {
      case 'EVENT_TYPE_RESET':
        this.logger.info(`RemoteInformer(${this.resource}): RESET, reconciling`);
        this.relisting = true;
        this.relist = new Map();
        this.resetCount++;
        this.token = event.resumeToken;
        this.notify();
        return;
      case 'EVENT_TYPE_INITIAL_STATE_DONE':
        if (this.relisting) this.reconcile();
        this.synced = true;
        this.stale = Boolean(event.stale);
        this.initialStateCount++;
        this.token = event.resumeToken;
        this.notify();
        return;
      case 'EVENT_TYPE_FRESH':
        this.stale = false;
        this.token = event.resumeToken;
        this.notify();
        return;
      case 'EVENT_TYPE_ADDED':
      case 'EVENT_TYPE_MODIFIED':
      case 'EVENT_TYPE_SYNC':
      case 'EVENT_TYPE_DELETED':
        break;
      default: // BOOKMARK (and any type this SDK does not know)
        this.token = event.resumeToken;
        this.notify();
        return;
    }
    if (event.object?.body !== 'json' || typeof event.object.json !== 'string') {
      throw new Error('event without a JSON object');
    }
    const obj = JSON.parse(event.object.json) as KubeObject;
    const key = objectKey(obj);
    if (event.type === 'EVENT_TYPE_ADDED' && event.initial && (this.relisting || this.synced)) {
      // A fresh initial state over a mirror that has content: collected,
      // applied as differences at INITIAL_STATE_DONE.
      this.relisting = true;
      this.relist.set(key, obj);
      this.token = event.resumeToken;
      this.notify();
      return;
    }
    if (event.type === 'EVENT_TYPE_DELETED') {
      const old = this.pop(key);
      this.token = event.resumeToken;
      this.notify();
      if (old !== undefined) this.fire('delete', obj, Boolean(event.tombstone));
      return;
    }
    const old = this.put(key, obj);
    this.token = event.resumeToken;
    this.notify();
    if (old === undefined) {
      this.fire('add', obj, Boolean(event.initial));
    } else if (event.type === 'EVENT_TYPE_SYNC' || !jsonEqual(old, obj)) {
      this.fire('update', old, obj);
    }
  }

  /** Replaces the mirror with the relisted state, reporting only the
   * differences to the handlers: deletes (tombstones) of objects gone, then
   * updates of changed ones and adds of new ones, in key order. */
  private reconcile(): void {
    const fresh = this.relist;
    this.relist = new Map();
    this.relisting = false;
    const initial = !this.synced;
    const gone = this.keys().filter((k) => !fresh.has(k));
    for (const key of gone) {
      const old = this.pop(key)!;
      this.notify();
      this.fire('delete', old, true);
    }
    for (const key of [...fresh.keys()].sort()) {
      const obj = fresh.get(key)!;
      const old = this.put(key, obj);
      this.notify();
      if (old === undefined) this.fire('add', obj, initial);
      else if (!jsonEqual(old, obj)) this.fire('update', old, obj);
    }
  }

  private fire(event: 'add' | 'update' | 'delete', a: KubeObject, b: KubeObject | boolean): void {
    for (const l of this.listeners(event)) {
      this.safe(() => (l as (x: unknown, y: unknown) => void)(a, b));
    }
  }

  private safe(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.logger.warn(`RemoteInformer(${this.resource}): a handler threw: ${(e as Error)?.stack ?? e}`);
    }
  }
}
