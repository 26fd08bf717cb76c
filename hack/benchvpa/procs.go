//go:build benchvpa

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

// proc is one component run as a local process.
type proc struct {
	name, side string
	cmd        *exec.Cmd
	done       chan struct{}
	exitErr    error
	// metricsURL is its Prometheus endpoint; readyURL answers 200 when it
	// is up (empty: wait for readyAddr to accept TLS connections).
	metricsURL, readyURL, readyAddr string
	// profileURL serves its CPU profile (--profiling), when asked for.
	profileURL string
	// proxy counts the process's requests to the API server.
	proxy   *countingProxy
	logPath string
	// env is added to the harness's environment for the process.
	env []string
	// pid is the process's id once started (read by the proxy's handler).
	pid atomic.Int64
}

// start runs bin with args, logging to dir/name.log, and waits until it is
// ready.
func startProc(ctx context.Context, p *proc, dir, bin string, args ...string) error {
	// Appended to: a component started again at the next scale keeps the
	// previous scale's log above.
	p.logPath = filepath.Join(dir, p.name+".log")
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	// Only loopback: no in-cluster config may be found.
	p.cmd.Env = append(append(os.Environ(), "KUBERNETES_SERVICE_HOST=", "KUBERNETES_SERVICE_PORT="), p.env...)
	p.done = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	p.pid.Store(int64(p.cmd.Process.Pid))
	go func() {
		p.exitErr = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start: %v (log %s)", p.name, p.exitErr, p.logPath)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if p.ready(ctx) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within 90s (log %s)", p.name, p.logPath)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (p *proc) ready(ctx context.Context) bool {
	if p.readyURL == "" {
		d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a readiness probe of a loopback port
		c, err := d.DialContext(ctx, "tcp", p.readyAddr)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	ok, _ := httpGet(ctx, p.readyURL)
	return ok
}

// stop sends SIGTERM, then SIGKILL after 15 s, and waits.
func (p *proc) stop() {
	if p.cmd == nil || p.cmd.Process == nil || p.done == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// alive returns an error if the process has exited.
func (p *proc) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited: %v (log %s)", p.name, p.exitErr, p.logPath)
	default:
		return nil
	}
}

// usage is a process's accounting at one instant.
type usage struct {
	cpu       float64 // seconds on CPU, summed over threads (ns resolution)
	cpuTicks  float64 // seconds, user + system from /proc/PID/stat (10 ms ticks)
	slices    uint64  // times a thread was put on a CPU, summed over threads
	rss, peak float64 // bytes
	requests  int64   // non-watch API requests so far
	watches   int64
}

func (p *proc) sample() (usage, error) {
	if p.pid.Load() == 0 {
		return usage{}, fmt.Errorf("%s: not started", p.name)
	}
	if err := p.alive(); err != nil {
		return usage{}, err
	}
	pid := strconv.FormatInt(p.pid.Load(), 10)
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return usage{}, err
	}
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return usage{}, err
	}
	var u usage
	if u.cpuTicks, err = bench.ParseProcStat(string(stat)); err != nil {
		return usage{}, err
	}
	// CPU with nanosecond resolution: the sum over the process's threads
	// (Go keeps its threads; one that exited would be missed, which is why
	// the 10-ms tick count is kept beside it as a check).
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		return usage{}, err
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/" + pid + "/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread is gone
		}
		v, n, err := bench.ParseSchedstat(string(b))
		if err != nil {
			return usage{}, err
		}
		u.cpu += v
		u.slices += n
	}
	if u.rss, u.peak, err = bench.ParseProcStatus(string(status)); err != nil {
		return usage{}, err
	}
	if p.proxy != nil {
		u.requests, u.watches = p.proxy.requests.Load(), p.proxy.watches.Load()
	}
	return u, nil
}

// metric returns the sum of the samples of the counter, gauge or histogram
// count name (for a histogram: its _count) whose labels include want.
func (p *proc) metric(ctx context.Context, name string, want map[string]string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s metrics: %w", p.name, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s metrics: %w", p.name, err)
	}
	fam, ok := fams[name]
	if !ok {
		return 0, nil // not observed yet
	}
	var sum float64
	for _, m := range fam.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		}
	}
	return sum, nil
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}

func httpGet(ctx context.Context, u string) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK, nil
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// countingProxy is a loopback HTTP reverse proxy to the API server that
// counts the requests of the one component pointed at it: the API requests
// per loop are counted on the wire, the same way for both sides, whatever
// metrics each side exports. The component's bearer token passes through,
// so the API server authenticates and authorizes it as itself. It serves
// TLS (a certificate of the testbed CA for 127.0.0.1): client-go sends no
// bearer token over plain HTTP.
type countingProxy struct {
	srv               *http.Server
	addr              string
	requests, watches atomic.Int64
	// marker, if set, recognises the request the component makes once at
	// the start of every loop (bench.LoopMarker); at each such request the
	// proxy samples the process with sample, before forwarding it, so the
	// loop boundaries cost the component nothing.
	marker func(method, path string, watch bool) bool
	sample func() (usage, error)
	mu     sync.Mutex
	marks  []mark
}

// mark is a sample of a process taken as one of its loops started.
type mark struct {
	u   usage
	at  time.Time
	err error
}

// markers returns the loop starts seen so far.
func (p *countingProxy) markers() []mark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.marks)
}

func newCountingProxy(apiserver *url.URL, caFile, certFile, keyFile string) (*countingProxy, error) {
	tlsCfg, err := rest.TLSConfigFor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: caFile}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{addr: ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(apiserver)
	rp.Transport = &http.Transport{TLSClientConfig: tlsCfg, MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: true}
	rp.FlushInterval = -1 // watches stream
	// A component stopped mid-watch makes the proxy log "context
	// canceled": noise.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			watch := r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1"
			if watch {
				p.watches.Add(1)
			} else {
				p.requests.Add(1)
			}
			if p.marker != nil && p.sample != nil && p.marker(r.Method, r.URL.Path, watch) {
				u, err := p.sample()
				p.mu.Lock()
				p.marks = append(p.marks, mark{u, time.Now(), err})
				p.mu.Unlock()
			}
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := p.srv.ServeTLS(ln, certFile, keyFile); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(os.Stderr, "bench-vpa: proxy %s: %v\n", p.addr, err)
		}
	}()
	return p, nil
}

func (p *countingProxy) close() { _ = p.srv.Close() }

// writeKubeconfig writes a kubeconfig that reaches the API server through
// the proxy at proxyAddr with token.
func writeKubeconfig(path, proxyAddr, caFile, token, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["bench"] = &clientcmdapi.Cluster{Server: "https://" + proxyAddr, CertificateAuthority: caFile}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: user}
	cfg.CurrentContext = "bench"
	return clientcmd.WriteToFile(*cfg, path)
}

// loadAvg is the 1-minute load average of the machine.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// fetchProfile takes a CPU profile of d from a --profiling endpoint into
// path.
func fetchProfile(ctx context.Context, url string, d time.Duration, path string) error {
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?seconds=%d", url, int(d.Seconds())), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
