package testapp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

func testConfig() Config {
	return Config{CPU: 2 * time.Millisecond, MemoryPerRequest: 1 << 20, BaseMemory: 4 << 20,
		MaxCPU: time.Second, MaxMemory: 64 << 20, MaxSleep: 5 * time.Second}
}

func newTestServer(t *testing.T, cfg Config) (*Server, *prometheus.Registry, *clocktesting.FakePassiveClock) {
	t.Helper()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	reg := prometheus.NewRegistry()
	s, err := New(cfg, clk, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, reg, clk
}

func TestBurnMeasuresThreadCPUTime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cpu        time.Duration
		competitor bool
	}{
		{"alone", 20 * time.Millisecond, false},
		{"with a competing goroutine", 20 * time.Millisecond, true},
		{"zero", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if tc.competitor {
				// One spinning goroutine per processor, so the burning
				// thread shares the CPUs and its wall time exceeds its
				// CPU time whenever it is descheduled.
				for range 2 {
					wg.Go(func() {
						for {
							select {
							case <-stop:
								return
							default:
							}
							for i := 0; i < 1000; i++ {
								_ = i * i
							}
						}
					})
				}
			}
			used, wall, err := Burn(tc.cpu)
			close(stop)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if used < tc.cpu {
				t.Errorf("burned %s of CPU, want at least %s", used, tc.cpu)
			}
			if wall < used {
				t.Errorf("wall time %s is below the CPU time %s", wall, used)
			}
			t.Logf("cpu %s wall %s", used, wall)
		})
	}
}

// rss reads the process's resident set size from /proc/self/statm.
func rss(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(raw))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}

func TestHoldIsResidentUntilReleased(t *testing.T) {
	const n = 64 << 20
	before := rss(t)
	b, err := Hold(n)
	if err != nil {
		t.Fatal(err)
	}
	after := rss(t)
	if b.Len() != n {
		t.Fatalf("held %d bytes, want %d", b.Len(), n)
	}
	if grew := after - before; grew < n*3/4 {
		t.Errorf("resident set grew by %d bytes for a hold of %d: the memory is not touched", grew, n)
	}
	b.Release()
	b.Release() // twice is harmless
	// Released at once, not when a garbage collection runs.
	if shrank := after - rss(t); shrank < n*3/4 {
		t.Errorf("resident set shrank by %d bytes after releasing %d: the memory is still resident", shrank, n)
	}
}

func TestMemoryHeldWhileInFlightThenReleased(t *testing.T) {
	cfg := testConfig()
	s, reg, _ := newTestServer(t, cfg)
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	if got := s.HeldBytes(); got != float64(cfg.BaseMemory) {
		t.Fatalf("held %g bytes at start, want the base %d", got, cfg.BaseMemory)
	}
	const mem = 8 << 20
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/?mem=8Mi&sleep=2s")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	want := float64(cfg.BaseMemory + mem)
	deadline := time.Now().Add(10 * time.Second)
	for s.HeldBytes() != want {
		if time.Now().After(deadline) {
			t.Fatalf("held %g bytes with one request in flight, want %g", s.HeldBytes(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.InFlight(); got != 1 {
		t.Errorf("in flight %g, want 1", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := s.HeldBytes(); got != float64(cfg.BaseMemory) {
		t.Errorf("held %g bytes after the request, want the base %d", got, cfg.BaseMemory)
	}
	if got := testutil.ToFloat64(s.m.inFlight); got != 0 {
		t.Errorf("in flight %g after the request, want 0", got)
	}
	if n, err := testutil.GatherAndCount(reg, HeldMemoryMetric); err != nil || n != 1 {
		t.Errorf("%s: %d series, %v", HeldMemoryMetric, n, err)
	}
}

func TestReadiness(t *testing.T) {
	cfg := testConfig()
	cfg.StartupDelay = 10 * time.Second
	s, _, clk := newTestServer(t, cfg)
	h := s.Handler()
	probe := func(path string) int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	for _, step := range []struct {
		name          string
		advance       time.Duration
		drain         bool
		ready, health int
	}{
		{"at start", 0, false, 503, 200},
		{"just before the delay", 9*time.Second + 999*time.Millisecond, false, 503, 200},
		{"at the delay", time.Millisecond, false, 200, 200},
		{"draining", 0, true, 503, 200},
	} {
		t.Run(step.name, func(t *testing.T) {
			clk.SetTime(clk.Now().Add(step.advance))
			if step.drain {
				s.Drain()
			}
			if got := probe("/readyz"); got != step.ready {
				t.Errorf("/readyz %d, want %d", got, step.ready)
			}
			if got := probe("/healthz"); got != step.health {
				t.Errorf("/healthz %d, want %d", got, step.health)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	s, _, _ := newTestServer(t, testConfig())
	h := s.Handler()
	for _, tc := range []struct {
		path string
		code int
	}{
		{"/", 200}, {"/?cpu=1ms", 200}, {"/healthz", 200}, {"/readyz", 200}, {"/metrics", 404}, {"/work", 404},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.code {
				t.Errorf("status %d, want %d", rec.Code, tc.code)
			}
		})
	}
	if got := testutil.ToFloat64(s.m.requests.WithLabelValues("200")); got != 2 {
		t.Errorf("%g work requests counted, want 2", got)
	}
}

func TestParseWork(t *testing.T) {
	s, _, _ := newTestServer(t, testConfig())
	for _, tc := range []struct {
		name    string
		query   string
		want    Work
		wantErr string
	}{
		{"defaults", "", Work{CPU: 2 * time.Millisecond, Memory: 1 << 20}, ""},
		{"overrides", "cpu=50ms&mem=4Mi&sleep=10ms", Work{CPU: 50 * time.Millisecond, Memory: 4 << 20, Sleep: 10 * time.Millisecond}, ""},
		{"bad duration", "cpu=fast", Work{}, `cpu="fast"`},
		{"cpu over the cap", "cpu=2s", Work{}, "cpu=2s: must be in"},
		{"negative sleep", "sleep=-1s", Work{}, "sleep=-1s"},
		{"memory over the cap", "mem=1Gi", Work{}, "mem=1Gi: above the maximum"},
		{"bad memory", "mem=lots", Work{}, `mem="lots"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/?"+tc.query, nil)
			got, err := s.ParseWork(r.URL.Query())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("work %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	cfg := testConfig()
	s, reg, _ := newTestServer(t, cfg)
	h := s.Handler()
	for _, q := range []string{"/?cpu=5ms", "/?cpu=5ms", "/?cpu=nonsense"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, q, nil))
	}
	if got := testutil.ToFloat64(s.m.requests.WithLabelValues("200")); got != 2 {
		t.Errorf("requests with code 200: %g, want 2", got)
	}
	if got := testutil.ToFloat64(s.m.requests.WithLabelValues("400")); got != 1 {
		t.Errorf("requests with code 400: %g, want 1", got)
	}
	if got := testutil.ToFloat64(s.m.failed); got != 0 {
		t.Errorf("failed requests %g, want 0 (400 is the client's fault)", got)
	}
	if got := testutil.ToFloat64(s.m.cpu); got < 0.010 {
		t.Errorf("CPU seconds %g, want at least 0.010", got)
	}
	n, err := testutil.GatherAndCount(reg, RequestDurationMetric, RequestsMetric, FailedRequestsMetric, InFlightMetric, CPUMetric)
	if err != nil {
		t.Fatal(err)
	}
	if n != 6 { // histogram, 2 codes, failed, in flight, cpu
		t.Errorf("%d series, want 6", n)
	}
}

func TestMaxRequestsPerConnection(t *testing.T) {
	cfg := testConfig()
	cfg.MaxRequestsPerConn = 3
	s, _, _ := newTestServer(t, cfg)
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.Config.ConnContext = ConnContext
	srv.Start()
	defer srv.Close()
	client := srv.Client()
	for i, wantClose := range []bool{false, false, true, false} {
		resp, err := client.Get(srv.URL + "/?cpu=0s")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Close != wantClose {
			t.Errorf("request %d: close %v, want %v", i+1, resp.Close, wantClose)
		}
	}
}

// replica serves "id" on a listener of addr with SO_REUSEPORT until its
// context is cancelled; stopped returns once it has shut down.
func replica(t *testing.T, addr, id string) (cancel func(), stopped <-chan error) {
	t.Helper()
	l, err := Listen(context.Background(), addr, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, id) })
	go func() { done <- ServeAll(ctx, nil, time.Second, 5*time.Second, &Served{Listener: l, Handler: h}) }()
	t.Cleanup(cancel)
	return cancel, done
}

// hits sends n requests, each on a new connection, and counts the answers
// by replica.
func hits(t *testing.T, url string, n int) map[string]int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	seen := map[string]int{}
	for range n {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		seen[string(b)]++
	}
	return seen
}

// freeAddr is a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestReusePortSharesAndStops(t *testing.T) {
	// Reserve a free port, then open two replicas on it.
	addr := freeAddr(t)
	stopA, doneA := replica(t, addr, "a")
	url := "http://" + addr + "/"
	if seen := hits(t, url, 20); seen["a"] != 20 {
		t.Fatalf("one replica: answers %v, want all from a", seen)
	}
	replica(t, addr, "b")
	t.Run("a new replica receives new connections", func(t *testing.T) {
		seen := hits(t, url, 200)
		if seen["a"] == 0 || seen["b"] == 0 {
			t.Errorf("answers %v, want both replicas", seen)
		}
	})
	t.Run("a removed replica stops receiving them", func(t *testing.T) {
		stopA()
		if err := <-doneA; err != nil {
			t.Fatal(err)
		}
		if seen := hits(t, url, 100); seen["b"] != 100 {
			t.Errorf("answers %v, want all 100 from b", seen)
		}
	})
	t.Run("without SO_REUSEPORT the port is taken", func(t *testing.T) {
		l, err := Listen(context.Background(), addr, false)
		if err == nil {
			l.Close()
			t.Fatal("a second listener without SO_REUSEPORT bound the port")
		}
	})
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Options)
		wantErr string
	}{
		{"defaults", func(*Options) {}, ""},
		{"bad memory", func(o *Options) { o.Memory = "much" }, "--memory-per-request"},
		{"negative cpu", func(o *Options) { o.CPU = -time.Second }, "--cpu must be >= 0"},
		{"cpu over the cap", func(o *Options) { o.CPU = time.Minute }, "above --max-cpu"},
		{"file sd without a metrics address", func(o *Options) { o.FileSD.Dir, o.FileSD.Pod = "/tmp", "p" }, "--file-sd needs"},
		{"pod with a slash", func(o *Options) { o.FileSD.Pod = "../x" }, "plain name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			tc.edit(o)
			err := o.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestWriteFileSD(t *testing.T) {
	dir := t.TempDir()
	path, err := writeFileSD(dir, "web-1", "127.0.0.1:9100", "demo")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"targets":["127.0.0.1:9100"],"labels":{"namespace":"demo","pod":"web-1"}}]`
	if string(raw) != want {
		t.Errorf("file_sd %s, want %s", raw, want)
	}
	if _, err := writeFileSD(dir+"/missing", "p", "a", "n"); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing directory gave %v", err)
	}
}
