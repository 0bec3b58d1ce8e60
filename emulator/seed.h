#ifndef EMULATOR_SEED_H_
#define EMULATOR_SEED_H_

#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "emulator/object_store.h"
#include "emulator/resource_registry.h"
#include "informer/util/clock.h"

namespace emulator {

// Inputs of one realistic Pod (shaped like the captured pods-1000 list:
// two containers with eight env vars each, probes, volumes, tolerations,
// managedFields; about 6 KiB of JSON).
struct PodParams {
  std::string ns;
  std::string name;
  std::string node;
  int app = 0;             // app-<n> label and image
  std::string owner_kind;  // empty: no ownerReference
  std::string owner_name;
  std::string owner_uid;
  std::string pod_ip;
  std::string timestamp = "2026-11-30T18:06:29Z";  // managedFields time
  // Set for Pods a ReplicaSet made (SeedSpreadPods): the pod-template-hash
  // label and the random suffix of the service account token volume, as
  // kube-controller-manager and the ServiceAccount admission name them.
  std::string template_hash;
  std::string token_volume_suffix;
};
std::string PodJson(const PodParams& params);

// Creates namespace `ns` (if absent) and `count` Pods pod-000000... spread
// over 100 nodes and 10 apps. Fails on the first store error.
absl::Status SeedPods(ObjectStore& store, const ResourceRegistry& registry,
                      int count, absl::string_view ns = "benchpods");

// How SeedSpreadPods spreads Pods: over `namespaces` namespaces
// (tenant-000, tenant-001, ...), each holding `apps_per_namespace`
// Deployments' ReplicaSets, and over `nodes` node names (node-0000, ...).
struct PodSpread {
  int namespaces = 100;
  int nodes = 5000;
  int apps_per_namespace = 10;
};

// The inputs of SeedSpreadPods' Pod number `i` (see below).
PodParams SpreadPodParams(int i, const PodSpread& spread);

// Creates the namespaces and `count` Pods of PodJson's shape as a cluster
// of ReplicaSets has them: Pod i is in namespace i % namespaces (so every
// namespace gets count / namespaces, give or take one), named
// <app>-<template hash>-<5 letters> with the ReplicaSet as its controller
// owner, on node i % nodes. Deterministic: the same objects every run.
absl::Status SeedSpreadPods(ObjectStore& store,
                            const ResourceRegistry& registry, int count,
                            const PodSpread& spread);

// Creates namespace `ns` (if absent) and `count` ConfigMaps cm-000000...,
// each with one key of `data_bytes` pseudo-random letters and digits (gzip
// shrinks them about as much as real data) and the managedFields entry
// kubectl's create leaves: with 1 KiB of data, about 1.5 KB of JSON each,
// the shape of a namespace full of application configuration.
absl::Status SeedConfigMaps(ObjectStore& store,
                            const ResourceRegistry& registry, int count,
                            absl::string_view ns = "benchcms",
                            int data_bytes = 1024);

// A small believable cluster: namespaces (default, kube-system, demo, shop),
// three nodes, Deployments with ReplicaSets and node-assigned Pods owned by
// them, ConfigMaps.
absl::Status SeedDemo(ObjectStore& store, const ResourceRegistry& registry);

// Churner changes a few demo objects every `interval` (a ConfigMap patch, a
// Pod replaced, a Deployment status update, an Event) so a demo informer
// has something to show. Requires SeedDemo's objects.
//
// Thread-safety: Start/Stop from one thread; ticks() from any. Waits go
// through `clock`. Stop (or the destructor) joins the thread.
class Churner {
 public:
  Churner(ObjectStore* store, const ResourceRegistry* registry,
          informer::Clock* clock, absl::Duration interval);
  ~Churner();
  void Start();
  void Stop();
  int64_t ticks() const;
  // Real-time condition wait for tests: true once ticks() >= n.
  bool AwaitTicks(int64_t n, absl::Duration timeout) const;

 private:
  void Run();
  void Tick(int64_t n);

  ObjectStore* const store_;
  const ResourceRegistry* const registry_;
  informer::Clock* const clock_;
  const absl::Duration interval_;
  mutable absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t ticks_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace emulator

#endif  // EMULATOR_SEED_H_
