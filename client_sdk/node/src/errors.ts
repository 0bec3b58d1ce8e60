import * as grpc from '@grpc/grpc-js';

/**
 * An error of a call to the sidecar, carrying its gRPC status.
 *
 * `code` is the gRPC status code (a `grpc.status` number, e.g.
 * `grpc.status.NOT_FOUND`), `codeName` its name ("NOT_FOUND") and `details`
 * the sidecar's message (e.g. "unknown resource \"nosuchthings\" ..."). The
 * sidecar's codes are documented in proto/informer/v1/*.proto: NOT_FOUND
 * (unknown resource, queue or object), INVALID_ARGUMENT (a malformed field;
 * the message names it), UNAVAILABLE (not synced yet, shutting down, or the
 * sidecar cannot be reached), RESOURCE_EXHAUSTED, UNAUTHENTICATED,
 * PERMISSION_DENIED.
 *
 * An event of a Watch stream the SDK cannot decode (not JSON) is reported as
 * a SidecarError with code INTERNAL and the decoding error in `details`.
 */
export class SidecarError extends Error {
  /** The gRPC status code (`grpc.status`). */
  readonly code: grpc.status;
  /** The name of `code`, e.g. "NOT_FOUND". */
  readonly codeName: string;
  /** The sidecar's status message. */
  readonly details: string;
  /** The trailing metadata of the call, if any. */
  readonly metadata?: grpc.Metadata;

  constructor(code: grpc.status, details: string, metadata?: grpc.Metadata) {
    const codeName = grpc.status[code] ?? `CODE_${code}`;
    super(`${codeName}: ${details}`);
    this.name = 'SidecarError';
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.metadata = metadata;
  }

  /** The SidecarError of a failed grpc-js call (a `grpc.ServiceError` or a
   * `grpc.StatusObject`); other errors become code UNKNOWN. */
  static from(err: unknown): SidecarError {
    if (err instanceof SidecarError) return err;
    const e = err as Partial<grpc.ServiceError & grpc.StatusObject>;
    if (e && typeof e.code === 'number') {
      return new SidecarError(e.code, e.details ?? String(e.message ?? ''), e.metadata);
    }
    return new SidecarError(grpc.status.UNKNOWN, String((err as Error)?.message ?? err));
  }
}
