// Command kube-informer-bench runs one client-go shared informer against a
// real API server and prints one JSON line: how long the initial sync took,
// how many objects it holds, the process's resident memory after the sync
// and at its peak, and, with --updates, the latency from the start of a
// write (a merge patch of an annotation) to the informer's update handler
// seeing it. It is the client-go baseline that the sidecar's benchmarks
// compare against.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

// tokenAnnotation carries a unique token per write so that the handler can
// match the event it sees to the write that caused it.
const tokenAnnotation = "informer-sidecar.bench/token"

type options struct {
	kubeconfig    string
	resource      string
	namespace     string
	labelSelector string
	client        string
	stripManaged  bool
	updates       int
	writers       int
	syncTimeout   time.Duration
	updateTimeout time.Duration
	qps           float64
	burst         int
}

const usageText = `kube-informer-bench: one client-go shared informer against a real API server.

Runs a shared informer for one resource (and namespace, and label selector),
waits for its initial sync and prints ONE JSON line on stdout:
  sync_seconds, objects, rss_bytes_after_sync, rss_peak_bytes (VmHWM), and
  with --updates=N: N merge patches of an annotation on the synced objects,
  spread over --writers goroutines, and the write-to-handler latency
  latency_p50_ms / latency_p90_ms / latency_p99_ms / latency_max_ms.
Errors go to stderr; the exit code is 1 on failure, 2 on bad flags.

Usage:
  kube-informer-bench --kubeconfig=FILE [--resource=v1/configmaps]
      [--namespace=NS] [--label-selector=SEL] [--strip-managed-fields]
      [--updates=N --writers=W]

Flags:
`

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("kube-informer-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageText)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubeconfig file (default: $KUBECONFIG)")
	fs.StringVar(&o.resource, "resource", "v1/configmaps",
		"VERSION/RESOURCE (core group) or GROUP/VERSION/RESOURCE")
	fs.StringVar(&o.namespace, "namespace", "",
		"namespace to watch (empty: all namespaces)")
	fs.StringVar(&o.labelSelector, "label-selector", "",
		"label selector for list and watch")
	fs.StringVar(&o.client, "client", "typed",
		"typed (client-go's generated informers, as controllers use) or "+
			"dynamic (unstructured objects; any resource, CRDs included)")
	fs.BoolVar(&o.stripManaged, "strip-managed-fields", false,
		"drop metadata.managedFields in the informer's transform")
	fs.IntVar(&o.updates, "updates", 0,
		"after the sync, patch the synced objects this many times")
	fs.IntVar(&o.writers, "writers", 1, "goroutines sharing the updates")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", 10*time.Minute,
		"how long to wait for the initial sync")
	fs.DurationVar(&o.updateTimeout, "update-timeout", 5*time.Minute,
		"how long to wait for all updates to reach the handler")
	fs.Float64Var(&o.qps, "qps", 1000, "client-side rate limit (requests/s)")
	fs.IntVar(&o.burst, "burst", 1000, "client-side burst")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if o.kubeconfig == "" {
		return nil, errors.New("--kubeconfig is required (or set KUBECONFIG)")
	}
	if o.client != "typed" && o.client != "dynamic" {
		return nil, fmt.Errorf("--client=%q: want typed or dynamic", o.client)
	}
	if o.updates < 0 || o.writers < 1 {
		return nil, errors.New("--updates must be >= 0 and --writers >= 1")
	}
	if _, err := parseGVR(o.resource); err != nil {
		return nil, err
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-informer-bench: %v\n", err)
		os.Exit(2)
	}
	line, err := run(o)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kube-informer-bench: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(line)
}

// informerFor builds the shared informer o asks for. Its factory is not
// started yet.
func informerFor(o *options, cfg *rest.Config, dyn dynamic.Interface,
	gvr schema.GroupVersionResource,
) (cache.SharedIndexInformer, func(<-chan struct{}), error) {
	tweak := func(lo *metav1.ListOptions) { lo.LabelSelector = o.labelSelector }
	if o.client == "dynamic" {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(
			dyn, 0, o.namespace, tweak)
		return f.ForResource(gvr).Informer(), f.Start, nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0,
		informers.WithNamespace(o.namespace),
		informers.WithTweakListOptions(tweak))
	gi, err := f.ForResource(gvr)
	if err != nil {
		return nil, nil, fmt.Errorf("%v (not a built-in resource? "+
			"use --client=dynamic)", err)
	}
	return gi.Informer(), f.Start, nil
}

func stripManagedFields(obj interface{}) (interface{}, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

func readProcStatus() (procStatus, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return procStatus{}, err
	}
	return parseProcStatus(string(b))
}

func run(o *options) (string, error) {
	gvr, _ := parseGVR(o.resource)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig %s: %v", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	// The reflector only logs list errors and retries; one plain list first
	// turns a wrong resource, namespace or permission into a clear error.
	ctx := context.Background()
	_, err = dyn.Resource(gvr).Namespace(o.namespace).List(ctx,
		metav1.ListOptions{Limit: 1, LabelSelector: o.labelSelector})
	if err != nil {
		return "", fmt.Errorf("list %s in namespace %q: %v",
			o.resource, o.namespace, err)
	}
	inf, start, err := informerFor(o, cfg, dyn, gvr)
	if err != nil {
		return "", err
	}
	if o.stripManaged {
		if err := inf.SetTransform(stripManagedFields); err != nil {
			return "", err
		}
	}
	probe := newLatencyProbe()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, newObj interface{}) { probe.observe(newObj) },
	}); err != nil {
		return "", err
	}
	stop := make(chan struct{})
	defer close(stop)
	began := time.Now()
	start(stop)
	// cache.WaitForCacheSync polls every 100 ms, too coarse for a small
	// sync; a 1 ms poll costs nothing next to the sync itself.
	deadline := began.Add(o.syncTimeout)
	for !inf.HasSynced() {
		if time.Now().After(deadline) {
			return "", fmt.Errorf("informer for %s did not sync within %s",
				o.resource, o.syncTimeout)
		}
		time.Sleep(time.Millisecond)
	}
	r := report{
		Resource: o.resource, Namespace: o.namespace,
		LabelSelector: o.labelSelector, Client: o.client,
		StripManagedFields: o.stripManaged,
		SyncSeconds:        time.Since(began).Seconds(),
		Updates:            o.updates, Writers: o.writers,
	}
	keys := inf.GetStore().ListKeys()
	r.Objects = len(keys)
	st, err := readProcStatus()
	if err != nil {
		return "", err
	}
	r.RSSBytesAfterSync = st.RSS
	if o.updates > 0 {
		samples, took, err := runUpdates(ctx, o, dyn, gvr, keys, probe)
		if err != nil {
			return "", err
		}
		r.setLatency(samples, took)
	}
	if st, err = readProcStatus(); err != nil {
		return "", err
	}
	r.RSSPeakBytes = st.Peak
	return r.line()
}

// latencyProbe matches handler events to writes by the token annotation.
// Safe for concurrent use by the writers and the informer's handler.
type latencyProbe struct {
	mu      sync.Mutex
	pending map[string]time.Time // token -> when its write started
	samples []time.Duration
	done    chan struct{} // closed when pending empties after expect
	expect  int
}

func newLatencyProbe() *latencyProbe {
	return &latencyProbe{pending: map[string]time.Time{},
		done: make(chan struct{})}
}

// arm sets how many samples complete the run.
func (p *latencyProbe) arm(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.expect = n
}

// started records that the write carrying token starts now.
func (p *latencyProbe) started(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pending[token] = time.Now()
}

// observe is the update handler: it records one sample for the first event
// that carries a pending token.
func (p *latencyProbe) observe(obj interface{}) {
	now := time.Now()
	a, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	token, ok := a.GetAnnotations()[tokenAnnotation]
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t0, ok := p.pending[token]
	if !ok {
		return
	}
	delete(p.pending, token)
	p.samples = append(p.samples, now.Sub(t0))
	if p.expect > 0 && len(p.samples) == p.expect {
		close(p.done)
	}
}

func (p *latencyProbe) result() (samples []time.Duration, missing int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.samples...), p.expect - len(p.samples)
}

// runUpdates spreads o.updates merge patches over o.writers goroutines,
// round-robin over the synced objects, and waits until the handler has seen
// every one. It returns the samples and the wall time from the first write
// to the last handler call.
func runUpdates(ctx context.Context, o *options, dyn dynamic.Interface,
	gvr schema.GroupVersionResource, keys []string, probe *latencyProbe,
) ([]time.Duration, time.Duration, error) {
	if len(keys) == 0 {
		return nil, 0, fmt.Errorf("--updates needs at least one synced "+
			"object of %s to patch; found none", o.resource)
	}
	probe.arm(o.updates)
	began := time.Now()
	errs := make(chan error, o.writers)
	var wg sync.WaitGroup
	for w := 0; w < o.writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < o.updates; i += o.writers {
				// The run's start time in the token keeps a rerun's patch
				// from being a no-op that the watch never reports.
				token := strconv.Itoa(i) + "-" +
					strconv.FormatInt(began.UnixNano(), 36)
				if err := patchOne(ctx, dyn, gvr, keys[i%len(keys)],
					token, probe); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, 0, err
	}
	select {
	case <-probe.done:
	case <-time.After(o.updateTimeout):
		_, missing := probe.result()
		return nil, 0, fmt.Errorf("%d of %d updates did not reach the "+
			"handler within %s", missing, o.updates, o.updateTimeout)
	}
	took := time.Since(began)
	samples, _ := probe.result()
	return samples, took, nil
}

func patchOne(ctx context.Context, dyn dynamic.Interface,
	gvr schema.GroupVersionResource, key, token string, probe *latencyProbe,
) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`,
		tokenAnnotation, token)
	probe.started(token)
	_, err = dyn.Resource(gvr).Namespace(ns).Patch(ctx, name,
		types.MergePatchType, []byte(body), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("patch %s %s: %v", gvr.Resource, key, err)
	}
	return nil
}
