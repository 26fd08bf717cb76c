//go:build benchwhatif

package app

// The what-if's scale benchmark (make bench-whatif, hack/bench-whatif.sh):
// not a timed test, and not in CI. The script backfills the history
// hack/benchwhatif generates into a Prometheus and runs this with its
// address; this reads every workload of the history as `recommender
// whatif` does, fits and replays them, and prints the wall time, the
// range queries and the points read.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/hack/benchwhatif/truth"
	"github.com/aware-k8s/aware/pkg/lab/whatif"
)

// countingProxy forwards to Prometheus and counts the range queries, the
// bytes they returned and when the first began and the last ended.
type countingProxy struct {
	queries, bytes atomic.Int64
	mu             sync.Mutex
	first, last    time.Time
}

func (c *countingProxy) wrap(target *url.URL) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(target)
	// The what-if's own Accept-Encoding goes to Prometheus as it is: the
	// default transport asks for gzip itself when the request does not,
	// and decompresses the answer, so --prometheus-gzip=false measured a
	// Prometheus that compressed every answer anyway.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableCompression = true
	rp.Transport = tr
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		begun := time.Now()
		cw := &countingWriter{ResponseWriter: w}
		rp.ServeHTTP(cw, r)
		if strings.HasSuffix(r.URL.Path, "/query_range") {
			c.queries.Add(1)
			c.bytes.Add(cw.n)
			c.mu.Lock()
			if c.first.IsZero() || begun.Before(c.first) {
				c.first = begun
			}
			if now := time.Now(); now.After(c.last) {
				c.last = now
			}
			c.mu.Unlock()
		}
	})
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// TestBenchWhatif runs the what-if over every workload of the backfilled
// history: AWARE_BENCH_WHATIF_PROMETHEUS is the Prometheus, and
// AWARE_BENCH_WHATIF_DIR holds workloads.json and receives the outputs
// (out/) and the printed report (report.txt).
func TestBenchWhatif(t *testing.T) {
	prom, dir := os.Getenv("AWARE_BENCH_WHATIF_PROMETHEUS"), os.Getenv("AWARE_BENCH_WHATIF_DIR")
	if prom == "" || dir == "" {
		t.Fatal("set AWARE_BENCH_WHATIF_PROMETHEUS and AWARE_BENCH_WHATIF_DIR (make bench-whatif does)")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "workloads.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m truth.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(prom)
	if err != nil {
		t.Fatal(err)
	}
	counter := &countingProxy{}
	proxy := httptest.NewServer(counter.wrap(target))
	defer proxy.Close()

	var targets fixedWorkloads
	cpuTruth := map[string]float64{}
	for _, w := range m.Workloads {
		targets = append(targets, whatifTarget{
			Namespace: m.Namespace, Deployment: w.Name, Container: m.Container,
			SLOMetric: m.Metric, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.Name}},
			RequestCPU: w.RequestCPU, RequestMemory: w.RequestMemory,
		})
		cpuTruth[m.Namespace+"/"+w.Name] = w.CPUSeconds
	}
	o := NewWhatifOptions()
	o.PrometheusAddress = proxy.URL
	o.Namespace = m.Namespace
	o.Step = m.Step
	o.Period = time.Duration(m.Samples) * m.Step
	o.Output = filepath.Join(dir, "out")
	// BENCH_WHATIF_GZIP=1 measures --prometheus-gzip, =0 its absence;
	// unset, the command's default.
	switch os.Getenv("AWARE_BENCH_WHATIF_GZIP") {
	case "1":
		o.PrometheusGzip = true
	case "0":
		o.PrometheusGzip = false
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	report, err := os.Create(filepath.Join(dir, "report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer report.Close()

	promPID := os.Getenv("AWARE_BENCH_WHATIF_PROMETHEUS_PID")
	promCPU0, selfCPU0 := procCPU(t, promPID), selfCPU(t)
	start := time.Now()
	// now is the history's last sample: the grid is the history's.
	err = runWhatif(context.Background(), o, targets, m.End, report, io.Discard)
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	promCPU, ownCPU := procCPU(t, promPID)-promCPU0, selfCPU(t)-selfCPU0
	counter.mu.Lock()
	reading := counter.last.Sub(counter.first)
	counter.mu.Unlock()

	f, err := os.Open(filepath.Join(o.Output, "whatif.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := whatif.ReadResult(f)
	if err != nil {
		t.Fatal(err)
	}
	var points int
	for _, h := range res.History {
		for _, s := range [][]float64{h.Rate, h.CPU, h.Memory, h.Replicas, h.RequestCPU, h.RequestMemory} {
			for _, v := range s {
				if !math.IsNaN(v) {
					points++
				}
			}
		}
	}
	var refused []string
	var cpuErr, costErr []float64
	for _, fit := range res.Fits {
		if fit.Refused != "" {
			refused = append(refused, fit.Workload+": "+fit.Refused)
			continue
		}
		cpuErr = append(cpuErr, math.Abs(fit.CPU.Slope/cpuTruth[fit.Workload]-1))
	}
	for _, c := range res.Consistency {
		costErr = append(costErr, math.Abs(c.CostError))
	}
	quantile := func(v []float64, q float64) float64 {
		if len(v) == 0 {
			return math.NaN()
		}
		slices.Sort(v)
		return v[int(q*float64(len(v)-1))]
	}
	steps := int(o.Period / o.Step)
	fmt.Printf("bench-whatif: %d workloads, %d steps of %s (%s), %d series backfilled; --prometheus-concurrency=%d --prometheus-gzip=%v\n",
		len(targets), steps, o.Step, o.Period, m.Series, o.PrometheusConcurrency, o.PrometheusGzip)
	fmt.Printf("bench-whatif: wall %.1fs (range queries %.1fs, fit, replay and outputs %.1fs)\n",
		wall.Seconds(), reading.Seconds(), (wall - reading).Seconds())
	fmt.Printf("bench-whatif: CPU %.1fs (what-if %.1fs, Prometheus %.1fs): %.1fs of wall on 2 idle cores at best\n",
		(ownCPU + promCPU).Seconds(), ownCPU.Seconds(), promCPU.Seconds(), (ownCPU+promCPU).Seconds()/2)
	fmt.Printf("bench-whatif: %d range queries, %.1f MB of answers, %d points kept (rate, CPU, memory, replicas, requests)\n",
		counter.queries.Load(), float64(counter.bytes.Load())/1e6, points)
	fmt.Printf("bench-whatif: %d fits refused; CPU seconds per request |error| median %.1f%%, max %.1f%%; replay of what ran |cost error| median %.1f%%, max %.1f%%\n",
		len(refused), 100*quantile(cpuErr, 0.5), 100*quantile(cpuErr, 1), 100*quantile(costErr, 0.5), 100*quantile(costErr, 1))
	for _, r := range refused {
		fmt.Printf("bench-whatif: refused %s\n", r)
	}
	if len(refused) > 0 {
		t.Errorf("%d of %d fits refused a history generated from the model", len(refused), len(targets))
	}
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user and system CPU time of process pid so far, from
// /proc (Linux); 0 without a pid.
func procCPU(t *testing.T, pid string) time.Duration {
	if pid == "" {
		return 0
	}
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// The fields after the command's closing parenthesis: state is the
	// first, utime and stime the 12th and 13th (clock ticks, 100 a second
	// on Linux).
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(f) < 13 {
		t.Fatalf("/proc/%s/stat: %q", pid, raw)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100)
}
