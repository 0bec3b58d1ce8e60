package main

// The pure parts of the benchmark: flag value parsing, the percentile
// arithmetic, /proc/self/status parsing and the one-line JSON report. They
// touch no network and no clock, so report_test.go checks them directly.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// parseGVR reads --resource: "VERSION/RESOURCE" for the core group
// ("v1/pods") or "GROUP/VERSION/RESOURCE" ("apps/v1/deployments").
func parseGVR(s string) (schema.GroupVersionResource, error) {
	parts := strings.Split(s, "/")
	for _, p := range parts {
		if p == "" {
			return schema.GroupVersionResource{}, fmt.Errorf(
				"--resource %q: empty part; want VERSION/RESOURCE "+
					"(v1/configmaps) or GROUP/VERSION/RESOURCE "+
					"(apps/v1/deployments)", s)
		}
	}
	switch len(parts) {
	case 2:
		return schema.GroupVersionResource{
			Version: parts[0], Resource: parts[1]}, nil
	case 3:
		return schema.GroupVersionResource{
			Group: parts[0], Version: parts[1], Resource: parts[2]}, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf(
		"--resource %q: want VERSION/RESOURCE (v1/configmaps) or "+
			"GROUP/VERSION/RESOURCE (apps/v1/deployments)", s)
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, which must be sorted ascending and non-empty: the smallest value
// that at least p percent of the samples are less than or equal to.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// latencySummary holds the write-to-handler percentiles in milliseconds.
type latencySummary struct {
	P50, P90, P99, Max float64
}

// summarize sorts a copy of samples and returns their percentiles; ok is
// false when there are no samples.
func summarize(samples []time.Duration) (s latencySummary, ok bool) {
	if len(samples) == 0 {
		return s, false
	}
	sorted := append([]time.Duration(nil), samples...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	ms := func(d time.Duration) float64 {
		return math.Round(float64(d)/float64(time.Microsecond)) / 1000
	}
	return latencySummary{
		P50: ms(percentile(sorted, 50)),
		P90: ms(percentile(sorted, 90)),
		P99: ms(percentile(sorted, 99)),
		Max: ms(sorted[len(sorted)-1]),
	}, true
}

// procStatus holds the memory lines of /proc/self/status, in bytes.
type procStatus struct {
	RSS  int64 // VmRSS: resident set size now.
	Peak int64 // VmHWM: the resident set's high-water mark.
}

// parseProcStatus reads VmRSS and VmHWM (reported in kB) from the text of
// /proc/self/status.
func parseProcStatus(text string) (procStatus, error) {
	var st procStatus
	found := 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return st, fmt.Errorf("/proc/self/status: bad %s line %q",
				name, sc.Text())
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return st, fmt.Errorf("/proc/self/status: %s: %v", name, err)
		}
		if name == "VmRSS" {
			st.RSS = kb * 1024
		} else {
			st.Peak = kb * 1024
		}
		found++
	}
	if found != 2 {
		return st, fmt.Errorf("/proc/self/status: VmRSS or VmHWM missing")
	}
	return st, nil
}

// report is the single JSON line the benchmark prints. Field names are an
// interface: later benchmarks parse them.
type report struct {
	Resource           string   `json:"resource"`
	Namespace          string   `json:"namespace"`
	LabelSelector      string   `json:"label_selector"`
	Client             string   `json:"client"`
	StripManagedFields bool     `json:"strip_managed_fields"`
	SyncSeconds        float64  `json:"sync_seconds"`
	Objects            int      `json:"objects"`
	RSSBytesAfterSync  int64    `json:"rss_bytes_after_sync"`
	RSSPeakBytes       int64    `json:"rss_peak_bytes"`
	Updates            int      `json:"updates"`
	Writers            int      `json:"writers"`
	UpdateSeconds      *float64 `json:"update_seconds,omitempty"`
	LatencyP50Ms       *float64 `json:"latency_p50_ms,omitempty"`
	LatencyP90Ms       *float64 `json:"latency_p90_ms,omitempty"`
	LatencyP99Ms       *float64 `json:"latency_p99_ms,omitempty"`
	LatencyMaxMs       *float64 `json:"latency_max_ms,omitempty"`
}

// setLatency fills the latency fields from samples and the wall time the
// updates took; it leaves them out when there were no samples.
func (r *report) setLatency(samples []time.Duration, took time.Duration) {
	s, ok := summarize(samples)
	if !ok {
		return
	}
	secs := took.Seconds()
	r.UpdateSeconds = &secs
	r.LatencyP50Ms, r.LatencyP90Ms = &s.P50, &s.P90
	r.LatencyP99Ms, r.LatencyMaxMs = &s.P99, &s.Max
}

// line renders r as one JSON line ending in a newline.
func (r *report) line() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}
