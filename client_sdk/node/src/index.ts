/**
 * Node.js client of the informer sidecar.
 *
 * - InformerClient: queries of the sidecar's cache (get, list, byIndex,
 *   indexValues, resources), a round trip each.
 * - RemoteInformer: a local mirror of one resource kept up to date by the
 *   sidecar's Watch stream, with handlers, indexes and automatic resume.
 * - WorkQueueWorker, createQueue, ...: workers of the sidecar's remote work
 *   queues.
 * - recordEvent: records a Kubernetes Event through the sidecar.
 * - SidecarError: how failed calls are reported (gRPC code and details).
 *
 * Every entry point takes `target` ("host:port" or "unix:/path") or an
 * existing grpc-js `channel` the caller owns.
 */
export { SidecarError } from './errors';
export { KubeObject, objectKey } from './objects';
export { ConnectionOptions, DEFAULT_TARGET, Logger, defaultLogger, protoDir } from './proto';
export {
  FINAL_WATCH_CODES, IndexFunc, RemoteInformer, RemoteInformerOptions, StreamFailure,
} from './informer';
export { InformerClient, InformerClientOptions, ListOptions, QueryOptions, ResourceStatus } from './client';
export {
  CallOptions, CreateQueueOptions, Lease, QueueStats, WorkQueueWorker, WorkQueueWorkerOptions,
  addAfter, createQueue, deleteQueue, forget, queueStats,
} from './workqueue';
export { ObjectReference, RecordEventOptions, objectReference, recordEvent } from './events';
export { DemoSidecar, pollUntil } from './demo';
