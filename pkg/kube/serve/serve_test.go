package serve

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "aware_test_events_total", Help: "Test."})
	reg.MustRegister(c)
	c.Inc()
	e := New(reg)
	ready := errors.New("caches not synced")
	e.AddReadyCheck("informers", func() error { return ready })
	e.AddHealthCheck("loop", func() error { return nil })

	ctx, cancel := context.WithCancel(context.Background())
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, e.Handler(), time.Second) }()
	base := "http://" + ln.Addr().String()

	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, path string
		code       int
		body       string
	}{
		{"healthy", "/healthz", 200, "ok"},
		{"not ready names the check", "/readyz", 503, "informers: caches not synced"},
		{"metrics from the injected registry", "/metrics", 200, "aware_test_events_total 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(tc.path)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%s: %d %q", tc.path, code, body)
			}
		})
	}
	ready = nil
	e.AddReadyCheck("informers", func() error { return nil })
	if code, _ := get("/readyz"); code != 200 {
		t.Fatalf("ready after check passes: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("graceful shutdown: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

func TestListenError(t *testing.T) {
	if err := Run(context.Background(), "256.0.0.1:99999", nil, time.Second); err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("got %v", err)
	}
}

func TestLintMetrics(t *testing.T) {
	for _, tc := range []struct {
		name, component, metric string
		counter                 bool
		want                    string
	}{
		{"conforming counter", "updater", "aware_updater_evictions_total", true, ""},
		{"dash in component name is dropped", "rl-agent", "aware_rlagent_decisions_total", true, ""},
		{"wrong component prefix", "updater", "aware_recommender_evictions_total", true, "must start with aware_updater_"},
		{"counter without _total", "updater", "aware_updater_evictions", true, "counter metrics should have \"_total\" suffix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if tc.counter {
				reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: tc.metric, Help: "Test."}))
			}
			err := LintMetrics(reg, tc.component)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
