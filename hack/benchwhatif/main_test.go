package main

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/hack/benchwhatif/truth"
)

// TestHistory generates a small history and checks what the what-if relies
// on: every series in OpenMetrics form, counters that never fall, at every
// sample as many pods with CPU and memory as kube-state-metrics' replicas,
// replicas within the HPA's bounds, and the manifest's counts.
func TestHistory(t *testing.T) {
	dir := t.TempDir()
	if err := run(dir, 3, 0.5, time.Minute, "2026-11-29T00:00:00Z", 7); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "workloads.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m truth.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Samples != 720 || len(m.Workloads) != 3 || !m.End.Equal(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("manifest: %d samples, %d workloads, end %s", m.Samples, len(m.Workloads), m.End)
	}
	f, err := os.Open(filepath.Join(dir, "history.om"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type key struct{ workload, ts string }
	replicas, cpuPods, memPods := map[key]float64{}, map[key]int{}, map[key]int{}
	last := map[string]float64{}
	series := map[string]bool{}
	var eof bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if eof {
			t.Fatalf("a line after # EOF: %q", line)
		}
		if line == "# EOF" {
			eof = true
			continue
		}
		// name{labels} value timestamp
		brace := strings.LastIndexByte(line, '}')
		fields := strings.Fields(line[brace+1:])
		if brace < 0 || len(fields) != 2 {
			t.Fatalf("malformed line %q", line)
		}
		id := line[:brace+1]
		series[id] = true
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil || math.IsNaN(v) || v < 0 {
			t.Fatalf("value of %q: %v %v", line, v, err)
		}
		label := func(name string) string {
			i := strings.Index(id, name+`="`)
			if i < 0 {
				return ""
			}
			rest := id[i+len(name)+2:]
			return rest[:strings.IndexByte(rest, '"')]
		}
		wl := label("app") + label("deployment")
		if pod := label("pod"); pod != "" {
			wl = pod[:strings.IndexByte(pod, '-')]
		}
		k := key{wl, fields[1]}
		switch {
		case strings.HasPrefix(id, "container_cpu_usage_seconds_total{"), strings.HasPrefix(id, truth.Metric+"_count{"):
			if v < last[id] {
				t.Fatalf("counter %s fell from %g to %g", id, last[id], v)
			}
			last[id] = v
			if strings.HasPrefix(id, "container_") {
				cpuPods[k]++
			}
		case strings.HasPrefix(id, "container_memory_working_set_bytes{"):
			memPods[k]++
		case strings.HasPrefix(id, "kube_deployment_status_replicas{"):
			replicas[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !eof {
		t.Fatal("no # EOF")
	}
	if len(series) != m.Series {
		t.Errorf("%d series written, the manifest says %d", len(series), m.Series)
	}
	if len(replicas) != 3*m.Samples {
		t.Fatalf("%d replica samples, want %d", len(replicas), 3*m.Samples)
	}
	for k, r := range replicas {
		if r < 2 || r > 8 || float64(cpuPods[k]) != r || float64(memPods[k]) != r {
			t.Fatalf("%v: %g replicas, %d pods with CPU, %d with memory", k, r, cpuPods[k], memPods[k])
		}
	}
}
