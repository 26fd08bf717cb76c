package serve

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestStartProfiling: the profiles are served on the metrics address with
// --profiling only, never on the health address unless it is the same.
func TestStartProfiling(t *testing.T) {
	for _, tc := range []struct {
		name        string
		profiling   bool
		sameAddress bool
		wantMetrics int // status of /debug/pprof/cmdline on the metrics address
		wantHealth  int // on the health address
	}{
		{"off", false, false, 404, 404},
		{"on: the metrics address only", true, false, 200, 404},
		{"on, one address for both", true, true, 200, 200},
		{"off, one address for both", false, true, 404, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.MetricsBindAddress, o.HealthBindAddress, o.Profiling = freePort(t), freePort(t), tc.profiling
			if tc.sameAddress {
				o.MetricsBindAddress = o.HealthBindAddress
			}
			if err := o.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			g, gctx := errgroup.WithContext(ctx)
			o.Start(gctx, g, New(prometheus.NewRegistry()))
			defer func() {
				cancel()
				if err := g.Wait(); err != nil {
					t.Errorf("shutdown: %v", err)
				}
			}()
			status := func(addr string) int {
				deadline := time.Now().Add(5 * time.Second)
				for {
					resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
					if err == nil {
						resp.Body.Close()
						return resp.StatusCode
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: %v", addr, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			if got := status(o.MetricsBindAddress); got != tc.wantMetrics {
				t.Errorf("metrics address: %d, want %d", got, tc.wantMetrics)
			}
			if got := status(o.HealthBindAddress); got != tc.wantHealth {
				t.Errorf("health address: %d, want %d", got, tc.wantHealth)
			}
		})
	}
}

func TestValidateProfilingNeedsMetrics(t *testing.T) {
	o := NewOptions()
	o.MetricsBindAddress, o.Profiling = "0", true
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--profiling") {
		t.Fatalf("Validate() = %v, want an error naming --profiling", err)
	}
}
