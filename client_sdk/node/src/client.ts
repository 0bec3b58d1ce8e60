// Queries of the sidecar's cache (informer.v1.Informer's unary calls).
//
// InformerClient asks the sidecar each time, so it costs a round trip per
// call but keeps no copy of the cache in the application; a RemoteInformer
// keeps a local mirror instead.
import * as grpc from '@grpc/grpc-js';

import { SidecarError } from './errors';
import { KubeObject, decodeObjects } from './objects';
import { ConnectionOptions, closeClient, makeClient, unary } from './proto';

// The sidecar's NOT_FOUND for a resource it does not serve starts with this
// (informer.proto documents it); any other NOT_FOUND of Get is a missing
// object.
const UNKNOWN_RESOURCE = 'unknown resource';

export interface InformerClientOptions extends ConnectionOptions {
  /** Deadline of each call in milliseconds (0: none). Default 30 s. */
  timeoutMs?: number;
}

export interface QueryOptions {
  /** Answer even if the informer has not synced yet. Default false. */
  allowStale?: boolean;
}

export interface ListOptions extends QueryOptions {
  /** Only objects of this namespace (default: all). */
  namespace?: string;
  /** Kubernetes label selector (default: every object). */
  labelSelector?: string;
  /** Objects per page (0: the sidecar's default, 500). */
  pageSize?: number;
}

/** The state of one of the sidecar's informers (ListResources). */
export interface ResourceStatus {
  resource: string;
  namespace: string;
  synced: boolean;
  objectCount: number;
  lastResourceVersion: string;
  lastError: string;
  streams: number;
  indexes: string[];
}

/**
 * The sidecar's cache queries with decoded objects.
 *
 *     const c = new InformerClient({ target: '127.0.0.1:50051' });
 *     const pod = await c.get('pods', 'default', 'web-0');   // null if absent
 *     const web = await c.list('pods', { labelSelector: 'app=web' });
 *     const onNode = await c.byIndex('pods', 'field:spec.nodeName', 'node-1');
 *     c.close();
 *
 * Failures reject with a SidecarError carrying the sidecar's gRPC code and
 * message: NOT_FOUND (unknown resource; the message lists those available),
 * INVALID_ARGUMENT (malformed selector, unknown index, expired continue
 * token), UNAVAILABLE (not synced yet without allowStale, shutting down or
 * unreachable), UNAUTHENTICATED / PERMISSION_DENIED (tokens file). Every
 * call has the client's `timeoutMs` deadline. Calls may run concurrently.
 */
export class InformerClient {
  private readonly opts: InformerClientOptions;
  private readonly client: grpc.Client;
  private readonly timeoutMs: number;
  private closed = false;

  constructor(opts: InformerClientOptions = {}) {
    const timeoutMs = opts.timeoutMs ?? 30_000;
    if (!(timeoutMs >= 0)) throw new RangeError('timeoutMs: must be >= 0');
    this.opts = opts;
    this.timeoutMs = timeoutMs;
    this.client = makeClient('Informer', opts);
  }

  /** Closes the channel if the client opened it; later calls reject. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    closeClient(this.client, this.opts);
  }

  private call<Res>(method: string, request: object): Promise<Res> {
    if (this.closed) return Promise.reject(new Error('InformerClient is closed'));
    return unary<Res>(this.client, method, request, this.opts, this.timeoutMs);
  }

  /** The cached object, or null when the cache has no such object.
   * `namespace` is '' (or null) for cluster-scoped objects. */
  async get(resource: string, namespace: string | null | undefined, name: string,
    opts: QueryOptions = {}): Promise<KubeObject | null> {
    if (!name) throw new RangeError('name: required');
    try {
      const r = await this.call<{ object: { body?: string; json?: string } }>('Get', {
        resource, namespace: namespace ?? '', name, allowStale: Boolean(opts.allowStale),
        encoding: 'ENCODING_JSON',
      });
      return decodeObjects([r.object])[0];
    } catch (e) {
      if (e instanceof SidecarError && e.code === grpc.status.NOT_FOUND &&
          !e.details.startsWith(UNKNOWN_RESOURCE)) {
        return null;
      }
      throw e;
    }
  }

  /** Every matching object in key order, fetched a page at a time, all
   * pages from one snapshot of the cache: only one page is in memory at a
   * time. */
  async *iterList(resource: string, opts: ListOptions = {}): AsyncGenerator<KubeObject> {
    const pageSize = opts.pageSize ?? 0;
    if (!(pageSize >= 0)) throw new RangeError('pageSize: must be >= 0');
    const request = {
      resource,
      namespace: opts.namespace ?? '',
      labelSelector: opts.labelSelector ?? '',
      limit: pageSize,
      allowStale: Boolean(opts.allowStale),
      continueToken: '',
      encoding: 'ENCODING_JSON',
    };
    for (;;) {
      const r = await this.call<{ objects: any[]; continueToken: string }>('List', request);
      yield* decodeObjects(r.objects);
      if (!r.continueToken) return;
      request.continueToken = r.continueToken;
    }
  }

  /** Every matching object (all pages of one snapshot), in key order. */
  async list(resource: string, opts: ListOptions = {}): Promise<KubeObject[]> {
    const out: KubeObject[] = [];
    for await (const obj of this.iterList(resource, opts)) out.push(obj);
    return out;
  }

  /** The objects whose index `indexName` ("namespace", "ownerUid",
   * "label:<key>", "field:<path>" or one configured for the resource) has
   * `indexValue`, in key order. */
  async byIndex(resource: string, indexName: string, indexValue: string,
    opts: QueryOptions = {}): Promise<KubeObject[]> {
    if (!indexName) throw new RangeError('indexName: required');
    const r = await this.call<{ objects: any[] }>('ByIndex', {
      resource, indexName, indexValue, allowStale: Boolean(opts.allowStale),
      encoding: 'ENCODING_JSON',
    });
    return decodeObjects(r.objects);
  }

  /** The values index `indexName` has objects for, sorted. */
  async indexValues(resource: string, indexName: string, opts: QueryOptions = {}): Promise<string[]> {
    if (!indexName) throw new RangeError('indexName: required');
    const r = await this.call<{ values: string[] }>('ListIndexValues', {
      resource, indexName, allowStale: Boolean(opts.allowStale),
    });
    return r.values;
  }

  /** The resources the sidecar has informers for, sorted by resource. */
  async resources(): Promise<ResourceStatus[]> {
    const r = await this.call<{ resources: any[] }>('ListResources', {});
    return r.resources.map((s) => ({
      resource: s.resource,
      namespace: s.namespace,
      synced: s.synced,
      objectCount: Number(s.objectCount),
      lastResourceVersion: s.lastResourceVersion,
      lastError: s.lastError,
      streams: s.streams,
      indexes: [...s.indexes],
    }));
  }
}
