package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aware-k8s/aware/e2e/loadgen"
	"github.com/aware-k8s/aware/hack/benchreal/simside"
	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// background is the running hogs of one background load.
type background struct {
	cores float64
	procs []*exec.Cmd
}

func startBackground(self string, cores float64, seed uint64) (*background, error) {
	b := &background{cores: cores}
	n, duty := hogs(cores)
	for i := range n {
		cmd := exec.Command(self, "-hog-duty", strconv.FormatFloat(duty, 'g', -1, 64), "-seed", strconv.FormatUint(seed+uint64(i), 10))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			b.stop()
			return nil, fmt.Errorf("start the background: %w", err)
		}
		b.procs = append(b.procs, cmd)
	}
	return b, nil
}

// stop kills the hogs; a nil background has none.
func (b *background) stop() {
	if b == nil {
		return
	}
	for _, p := range b.procs {
		_ = p.Process.Kill()
		_ = p.Wait()
	}
	b.procs = nil
}

// startIn starts bin with args as a process of cgroup cg, writing its
// output to out (nil: discarded), killed if the probe dies. A shell moves
// itself into the cgroup and then becomes bin, so bin never runs outside
// its quota.
func startIn(cg *cgroup, out io.Writer, bin string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$0" && exec "$@"`, cg.procs(), bin}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	return cmd, nil
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// effectiveLimit is the CPU (cores) that as many busy threads as the node
// has cores get over 5 s in a cgroup of the given limit: the quota as the
// kernel enforces it, which may let a period's work run past the quota by
// up to a tick per CPU.
func effectiveLimit(ctx context.Context, self, root string, v2 bool, limit float64) (float64, error) {
	cg, err := newCgroup(root, v2, fmt.Sprintf("aware-quotaprobe-%d-limit", os.Getpid()), limit)
	if err != nil {
		return 0, err
	}
	defer func() { _ = cg.remove() }()
	cmd, err := startIn(cg, nil, self, "-hog-duty", "1", "-hog-threads", strconv.Itoa(runtime.NumCPU()))
	if err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := pause(ctx, time.Second); err != nil {
		return 0, err
	}
	t0 := time.Now()
	c0, err := processCPU(cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	if err := pause(ctx, 5*time.Second); err != nil {
		return 0, err
	}
	c1, err := processCPU(cmd.Process.Pid)
	if err != nil {
		return 0, err
	}
	return (c1 - c0) / time.Since(t0).Seconds(), nil
}

const (
	burnMetric = "aware_testapp_cpu_seconds_total"
	gcMetric   = "go_gc_duration_seconds_count"
)

// window is one load-generator window of a cell, after the warm-up.
type window struct {
	OK, Lost int
	P50, P95 float64
}

// result is one measured cell.
type result struct {
	cell
	// Rate is the answered requests per second over the measured windows.
	Rate     float64
	OK, Lost int
	Windows  []window
	CPU      cpuUse
	// P95 is the geometric mean of the windows' p95; SDLogP95 their
	// spread; P50 the geometric mean of the windows' p50 (seconds).
	P95, SDLogP95, P50 float64
	// ModelP95 is the simulator's CFS quota model's p95 at the limit, the
	// measured rate and CPU per request, on the node's cores;
	// ModelBackgroundP95 the same beside the cell's background
	// (sim.Config.NodeBackground).
	ModelP95, ModelBackgroundP95 float64
	// ModelTick is the scheduler tick the models took (-tick).
	ModelTick time.Duration `json:",omitempty"`
	// Cores is the node's cores the models took.
	Cores float64
}

// cpuUse is what a cell's replica did with its CPU.
type cpuUse struct {
	// Idle is the replica's CPU without traffic (5 s before the load).
	Idle float64
	// PerRequest is the replica's CPU over the measured windows, less its
	// idle CPU, over the requests answered in them (seconds).
	PerRequest float64
	// BurnPerRequest is the thread CPU the app's requests burned, per
	// request: the rest of PerRequest is the HTTP server's, the
	// connections' and the runtime's. GCPerSecond is its GC cycles.
	BurnPerRequest, GCPerSecond float64
	// ThrottledShare is the share of periods with runnable threads
	// throttled; ThrottledPerSecond the throttled thread time per second.
	ThrottledShare, ThrottledPerSecond float64
	GOMAXPROCS                         int
}

// freePort finds a loopback port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// measure runs cell c: the rate is c.Utilisation·c.Limit/perRequest, the
// CPU seconds a request is expected to take.
func measure(ctx context.Context, o options, root string, v2 bool, i int, c cell, perRequest float64) (result, error) {
	r := result{cell: c}
	port, err := freePort()
	if err != nil {
		return r, err
	}
	cg, err := newCgroup(root, v2, fmt.Sprintf("aware-quotaprobe-%d-%d", os.Getpid(), i), c.Limit)
	if err != nil {
		return r, err
	}
	defer func() { _ = cg.remove() }()
	logf, err := os.Create(filepath.Join(o.out, fmt.Sprintf("cell-%02d.log", i)))
	if err != nil {
		return r, fmt.Errorf("replica log: %w", err)
	}
	defer logf.Close()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	cmd, err := startIn(cg, logf, o.testapp,
		"--address="+addr, "--cpu="+o.cpu.String(), "--memory-per-request=1Mi", "--base-memory=48Mi",
		"--startup-delay=0s", "--shutdown-timeout=5s")
	if err != nil {
		return r, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	base := "http://" + addr
	if err := waitReady(ctx, base+"/readyz", 15*time.Second); err != nil {
		return r, err
	}
	pid := cmd.Process.Pid
	m0, err := scrape(base + "/metrics")
	if err != nil {
		return r, err
	}
	r.CPU.GOMAXPROCS = int(m0["go_sched_gomaxprocs_threads"])
	idle0, err := processCPU(pid)
	if err != nil {
		return r, err
	}
	const idleFor = 5 * time.Second
	if err := pause(ctx, idleFor); err != nil {
		return r, err
	}
	idle1, err := processCPU(pid)
	if err != nil {
		return r, err
	}
	r.CPU.Idle = (idle1 - idle0) / idleFor.Seconds()

	rate := c.Utilisation * c.Limit / perRequest
	total := o.window + o.duration
	cfg := loadgen.Config{
		Target:          base + "/",
		Series:          loadgen.Series{Starts: []time.Duration{0}, Rates: []float64{rate}},
		Duration:        total,
		MaxRequests:     uint64(math.Ceil(2*rate*total.Seconds())) + 100,
		MaxRate:         rate*1.01 + 1,
		Timeout:         10 * time.Second,
		Seed:            o.seed + uint64(i),
		Window:          o.window,
		RequestsPerConn: o.perConnection,
	}
	// The measured span starts after the warm-up window.
	type sample struct {
		at       time.Time
		cpu      float64
		throttle throttling
		metrics  map[string]float64
		err      error
	}
	var mu sync.Mutex
	var first sample
	take := func() sample {
		s := sample{at: time.Now()}
		if s.cpu, s.err = processCPU(pid); s.err == nil {
			s.throttle, s.err = cg.throttling()
		}
		if s.err == nil {
			s.metrics, s.err = scrape(base + "/metrics")
		}
		return s
	}
	timer := time.AfterFunc(o.window, func() { mu.Lock(); first = take(); mu.Unlock() })
	var records strings.Builder
	sum, err := loadgen.Run(ctx, cfg, prometheus.NewRegistry(), &records)
	timer.Stop()
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	if err != nil {
		return r, fmt.Errorf("load: %w", err)
	}
	last := take()
	mu.Lock()
	defer mu.Unlock()
	if first.at.IsZero() {
		return r, errors.New("the run ended before its warm-up")
	}
	if err := errors.Join(first.err, last.err); err != nil {
		return r, fmt.Errorf("samples: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.out, fmt.Sprintf("cell-%02d.jsonl", i)), []byte(records.String()), 0o644); err != nil {
		return r, fmt.Errorf("records: %w", err)
	}
	if sum.Late > 0 {
		return r, fmt.Errorf("%d requests completed after their window: raise -window", sum.Late)
	}
	if r.Windows, err = measuredWindows(strings.NewReader(records.String())); err != nil {
		return r, err
	}
	for _, w := range r.Windows {
		r.OK += w.OK
		r.Lost += w.Lost
	}
	if r.OK == 0 {
		return r, errors.New("no request answered in the measured windows")
	}
	span := last.at.Sub(first.at).Seconds()
	r.Rate = float64(r.OK) / (float64(len(r.Windows)) * o.window.Seconds())
	r.CPU.PerRequest = (last.cpu - first.cpu - r.CPU.Idle*span) / float64(r.OK)
	r.CPU.BurnPerRequest = (last.metrics[burnMetric] - first.metrics[burnMetric]) / float64(r.OK)
	r.CPU.GCPerSecond = (last.metrics[gcMetric] - first.metrics[gcMetric]) / span
	th := last.throttle.sub(first.throttle)
	if th.Periods > 0 {
		r.CPU.ThrottledShare = float64(th.Throttled) / float64(th.Periods)
	}
	r.CPU.ThrottledPerSecond = th.ThrottledSeconds / span
	r.P95, r.SDLogP95 = logStats(r.Windows, func(w window) float64 { return w.P95 })
	r.P50, _ = logStats(r.Windows, func(w window) float64 { return w.P50 })
	r.setModels(float64(runtime.NumCPU()), o.tick)
	return r, nil
}

// setModels computes the cell's model p95s on a node of cores cores whose
// scheduler tick the model takes to be tick.
func (r *result) setModels(cores float64, tick time.Duration) {
	r.Cores, r.ModelTick = cores, tick
	node := simside.QuotaNode{Cores: cores, Tick: tick}
	r.ModelP95 = simside.QuotaP95(sim.Demand{CPUSeconds: math.Max(r.CPU.PerRequest, 1e-4)}, 0, r.Limit, r.Rate, node)
	node.Background = r.Background
	r.ModelBackgroundP95 = simside.QuotaP95(sim.Demand{CPUSeconds: math.Max(r.CPU.PerRequest, 1e-4)}, 0, r.Limit, r.Rate, node)
}

// measuredWindows reads the load generator's records after the first
// (the warm-up), keeping those with an answered request.
func measuredWindows(rd io.Reader) ([]window, error) {
	var out []window
	dec := json.NewDecoder(bufio.NewReader(rd))
	for {
		var rec loadgen.Record
		if err := dec.Decode(&rec); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("load records: %w", err)
		}
		if rec.Window == 0 || rec.P95 == nil || rec.P50 == nil {
			continue
		}
		out = append(out, window{OK: rec.OK, Lost: rec.Lost, P50: *rec.P50, P95: *rec.P95})
	}
	if len(out) == 0 {
		return nil, errors.New("load records: no measured window with an answered request")
	}
	return out, nil
}

// logStats is the geometric mean and the sd of the log of f over ws.
func logStats(ws []window, f func(window) float64) (geo, sd float64) {
	var s, ss float64
	n := 0
	for _, w := range ws {
		if v := f(w); v > 0 {
			l := math.Log(v)
			s += l
			ss += l * l
			n++
		}
	}
	if n == 0 {
		return 0, 0
	}
	m := s / float64(n)
	if n > 1 {
		sd = math.Sqrt(math.Max(ss-float64(n)*m*m, 0) / float64(n-1))
	}
	return math.Exp(m), sd
}

func waitReady(ctx context.Context, url string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the app at %s was not ready within %s", url, within)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scrape reads the unlabelled samples of the app's /metrics.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url) //nolint:gosec,noctx // a loopback URL of the probe's own making
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		line := s.Text()
		if strings.HasPrefix(line, "#") || strings.ContainsRune(line, '{') {
			continue
		}
		if f := strings.Fields(line); len(f) == 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[f[0]] = v
			}
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	return out, nil
}
