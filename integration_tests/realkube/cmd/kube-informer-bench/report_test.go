package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func TestPercentileNearestRank(t *testing.T) {
	var sorted []time.Duration
	for i := 1; i <= 100; i++ {
		sorted = append(sorted, ms(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, ms(50)}, {90, ms(90)}, {99, ms(99)}, {100, ms(100)}, {0.5, ms(1)}} {
		if got := percentile(sorted, c.p); got != c.want {
			t.Errorf("percentile(1..100ms, %v) = %v, want %v", c.p, got, c.want)
		}
	}
	// Ten samples: p99 is the largest, p50 the fifth, p90 the ninth.
	ten := sorted[:10]
	if got := percentile(ten, 99); got != ms(10) {
		t.Errorf("p99 of 1..10ms = %v, want 10ms", got)
	}
	if got := percentile(ten, 50); got != ms(5) {
		t.Errorf("p50 of 1..10ms = %v, want 5ms", got)
	}
	if got := percentile(ten, 90); got != ms(9) {
		t.Errorf("p90 of 1..10ms = %v, want 9ms", got)
	}
	if got := percentile([]time.Duration{ms(7)}, 50); got != ms(7) {
		t.Errorf("p50 of one sample = %v, want 7ms", got)
	}
}

func TestSummarizeSortsACopy(t *testing.T) {
	samples := []time.Duration{ms(30), ms(10), ms(20), 1500 * time.Microsecond}
	s, ok := summarize(samples)
	if !ok {
		t.Fatal("summarize of four samples reported none")
	}
	want := latencySummary{P50: 10, P90: 30, P99: 30, Max: 30}
	if s != want {
		t.Errorf("summarize = %+v, want %+v", s, want)
	}
	if samples[0] != ms(30) {
		t.Errorf("summarize reordered its input: %v", samples)
	}
	s, _ = summarize([]time.Duration{1500 * time.Microsecond})
	if s.P50 != 1.5 {
		t.Errorf("1.5ms sample summarized as %v ms", s.P50)
	}
	if _, ok := summarize(nil); ok {
		t.Error("summarize(nil) reported samples")
	}
}

func TestParseGVR(t *testing.T) {
	for in, want := range map[string]schema.GroupVersionResource{
		"v1/configmaps":       {Version: "v1", Resource: "configmaps"},
		"apps/v1/deployments": {Group: "apps", Version: "v1", Resource: "deployments"},
	} {
		got, err := parseGVR(in)
		if err != nil || got != want {
			t.Errorf("parseGVR(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "pods", "v1/", "/v1/pods", "a/b/c/d"} {
		if _, err := parseGVR(bad); err == nil ||
			!strings.Contains(err.Error(), "--resource") {
			t.Errorf("parseGVR(%q) error = %v, want a --resource error", bad, err)
		}
	}
}

const statusText = `Name:	kube-informer-b
VmPeak:	 1500000 kB
VmHWM:	   81920 kB
VmRSS:	   40960 kB
Threads:	9
`

func TestParseProcStatus(t *testing.T) {
	st, err := parseProcStatus(statusText)
	if err != nil {
		t.Fatal(err)
	}
	if st.RSS != 40960*1024 || st.Peak != 81920*1024 {
		t.Errorf("parseProcStatus = %+v", st)
	}
	if _, err := parseProcStatus("Name:\tx\nVmRSS:\t1 kB\n"); err == nil {
		t.Error("status without VmHWM parsed without error")
	}
	if _, err := parseProcStatus("VmRSS:\t1 MB\nVmHWM:\t1 kB\n"); err == nil {
		t.Error("status with a non-kB unit parsed without error")
	}
}

func TestReadProcStatusOfThisProcess(t *testing.T) {
	st, err := readProcStatus()
	if err != nil {
		t.Fatal(err)
	}
	if st.RSS <= 0 || st.Peak < st.RSS {
		t.Errorf("own status: rss %d, peak %d", st.RSS, st.Peak)
	}
}

func TestReportLineWithoutUpdates(t *testing.T) {
	r := report{Resource: "v1/pods", Client: "typed", SyncSeconds: 1.25,
		Objects: 3, RSSBytesAfterSync: 100, RSSPeakBytes: 200, Writers: 1}
	line, err := r.line()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Fatalf("not one line: %q", line)
	}
	var got map[string]interface{}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]interface{}{"sync_seconds": 1.25,
		"objects": 3.0, "rss_bytes_after_sync": 100.0, "rss_peak_bytes": 200.0,
		"strip_managed_fields": false, "resource": "v1/pods", "updates": 0.0} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["latency_p50_ms"]; ok {
		t.Errorf("latency reported without updates: %s", line)
	}
}

func TestReportLineWithUpdates(t *testing.T) {
	r := report{Updates: 4, Writers: 2}
	r.setLatency([]time.Duration{ms(4), ms(1), ms(3), ms(2)}, 2*time.Second)
	line, err := r.line()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]interface{}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]float64{"latency_p50_ms": 2,
		"latency_p90_ms": 4, "latency_p99_ms": 4, "latency_max_ms": 4,
		"update_seconds": 2, "writers": 2} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestProbeMatchesTokensOnce(t *testing.T) {
	p := newLatencyProbe()
	p.arm(2)
	obj := func(token string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Annotations: map[string]string{tokenAnnotation: token}}}
	}
	p.started("a")
	p.started("b")
	p.observe(obj("a"))
	p.observe(obj("a"))       // a second event with the same token
	p.observe(obj("unknown")) // another writer's token
	p.observe(&corev1.ConfigMap{})
	if _, missing := p.result(); missing != 1 {
		t.Fatalf("missing = %d after one matched token, want 1", missing)
	}
	p.observe(obj("b"))
	select {
	case <-p.done:
	default:
		t.Fatal("done not closed after both tokens were seen")
	}
	if samples, missing := p.result(); len(samples) != 2 || missing != 0 {
		t.Errorf("samples %v, missing %d", samples, missing)
	}
}

func TestStripManagedFields(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := stripManagedFields(cm)
	if err != nil || out.(*corev1.ConfigMap).ManagedFields != nil {
		t.Errorf("managedFields kept: %v, %v", out, err)
	}
}

func TestFlags(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	if _, err := parseFlags(nil, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "--kubeconfig") {
		t.Errorf("no kubeconfig: err = %v", err)
	}
	o, err := parseFlags([]string{"--kubeconfig=k", "--resource=v1/pods",
		"--namespace=ns", "--label-selector=a=b", "--strip-managed-fields",
		"--updates=10", "--writers=3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.resource != "v1/pods" || o.namespace != "ns" ||
		o.labelSelector != "a=b" || !o.stripManaged || o.updates != 10 ||
		o.writers != 3 || o.client != "typed" {
		t.Errorf("parsed %+v", o)
	}
	for _, bad := range [][]string{{"--kubeconfig=k", "--writers=0"},
		{"--kubeconfig=k", "--client=other"},
		{"--kubeconfig=k", "--resource=pods"}, {"--kubeconfig=k", "extra"}} {
		if _, err := parseFlags(bad, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}
