// Kubernetes objects as the SDK hands them out: parsed JSON.

/** A Kubernetes object parsed from the sidecar's JSON. */
export type KubeObject = { [field: string]: any };

/** The object's key: "namespace/name", or "name" if cluster-scoped. */
export function objectKey(obj: KubeObject): string {
  const meta = obj?.metadata ?? {};
  const ns: string = meta.namespace ?? '';
  const name: string = meta.name ?? '';
  return ns ? `${ns}/${name}` : name;
}

/** Structural equality of two JSON values (what Python's == does on dicts). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => jsonEqual(v, bb[i]));
  }
  const ak = Object.keys(a as object);
  const bo = b as Record<string, unknown>;
  if (ak.length !== Object.keys(bo).length) return false;
  return ak.every((k) => Object.prototype.hasOwnProperty.call(bo, k) &&
    jsonEqual((a as Record<string, unknown>)[k], bo[k]));
}

/** Decodes the objects of a response; every request of the SDK asks for
 * JSON, so another body is a sidecar that ignored it and must not pass
 * silently. */
export function decodeObjects(objects: Array<{ body?: string; json?: string }>): KubeObject[] {
  return objects.map((o) => {
    if (o.body !== 'json' || typeof o.json !== 'string') {
      throw new Error('sidecar answered without a JSON object body');
    }
    return JSON.parse(o.json) as KubeObject;
  });
}
