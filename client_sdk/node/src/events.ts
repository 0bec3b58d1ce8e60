// Recording Kubernetes Events through the sidecar (informer.v1.Events).
import { KubeObject } from './objects';
import { ConnectionOptions, unary, withClient } from './proto';

/** The object an event is about (a core/v1 ObjectReference). */
export interface ObjectReference {
  kind: string;
  name: string;
  namespace?: string;
  uid?: string;
  apiVersion?: string;
  fieldPath?: string;
}

const REF_FIELDS = new Set(['kind', 'name', 'namespace', 'uid', 'apiVersion', 'fieldPath']);

/** An ObjectReference for recordEvent from a Kubernetes object (as the
 * informer mirror holds it). The sidecar's cached objects usually carry no
 * `kind`: pass it (e.g. "ConfigMap") unless the object has one. */
export function objectReference(obj: KubeObject, kind?: string, apiVersion?: string): ObjectReference {
  const meta = obj?.metadata ?? {};
  const ref: ObjectReference = {
    kind: kind || obj?.kind || '',
    namespace: meta.namespace ?? '',
    name: meta.name ?? '',
    uid: meta.uid ?? '',
    apiVersion: apiVersion || obj?.apiVersion || '',
  };
  if (!ref.kind) throw new RangeError('kind: the object has no kind; pass kind');
  return ref;
}

export interface RecordEventOptions extends ConnectionOptions {
  /** Deadline in milliseconds (0: none). Default 10 s. */
  timeoutMs?: number;
}

/**
 * Records one Event about `objectRef` ("Normal" or "Warning"). Resolves once
 * the sidecar queued the event for the API server. Rejects with a
 * SidecarError: INVALID_ARGUMENT (the message names the field),
 * RESOURCE_EXHAUSTED (the sidecar's queue is full; retry later),
 * UNAVAILABLE; a RangeError for an unknown field of `objectRef`.
 */
export async function recordEvent(objectRef: ObjectReference, type: string, reason: string,
  message = '', opts: RecordEventOptions = {}): Promise<void> {
  const unknown = Object.keys(objectRef).filter((k) => !REF_FIELDS.has(k)).sort();
  if (unknown.length) throw new RangeError(`objectRef: unknown field(s) ${unknown.join(', ')}`);
  const request = { object: { ...objectRef }, type, reason, message };
  await withClient('Events', opts, (client) =>
    unary(client, 'Record', request, opts, opts.timeoutMs ?? 10_000));
}
