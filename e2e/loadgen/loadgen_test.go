package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/aware-k8s/aware/e2e/testapp"
	"github.com/aware-k8s/aware/pkg/kube/cli"
)

func TestCheckTargetRefusesNonLoopback(t *testing.T) {
	for _, tc := range []struct {
		target  string
		wantErr string
	}{
		{"http://127.0.0.1:8080/", ""},
		{"http://127.3.2.1:80/?cpu=10ms", ""},
		{"http://[::1]:8080/", ""},
		{"https://LOCALHOST:8443/x", ""},
		{"http://10.0.0.1:8080/", `host "10.0.0.1" is not loopback`},
		{"http://example.com/", `host "example.com" is not loopback`},
		{"http://0.0.0.0:8080/", `host "0.0.0.0" is not loopback`},
		{"http://[::]:8080/", `host "::" is not loopback`},
		{"http://localhost.example.com/", "is not loopback"},
		{"http://127.0.0.1.nip.io/", "is not loopback"},
		{"ftp://127.0.0.1/", `scheme "ftp"`},
		{"127.0.0.1:8080", `target "127.0.0.1:8080"`},
	} {
		t.Run(tc.target, func(t *testing.T) {
			_, err := CheckTarget(tc.target)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			// Run refuses it before sending anything.
			cfg := testRunConfig(tc.target, 10)
			if _, err := Run(context.Background(), cfg, prometheus.NewRegistry(), &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Run: error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDialRefusesNonLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:80", true}, {"[::1]:80", true}, {"192.168.1.2:80", false}, {"[2001:db8::1]:80", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			err := dialLoopbackOnly("tcp", tc.addr, nil)
			if (err == nil) != tc.ok {
				t.Errorf("error %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestWindows(t *testing.T) {
	var buf bytes.Buffer
	s := Series{Starts: []time.Duration{0}, Rates: []float64{2}}
	w := newWindows(10*time.Second, 30*time.Second, 3*time.Second, s, &buf)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// Window 0: 20 OK requests of 1..20 ms, one timeout of 2 s, one error.
	for i := 1; i <= 20; i++ {
		w.add(time.Duration(i)*100*time.Millisecond, OK, ms(i))
	}
	w.add(5*time.Second, Timeout, 2*time.Second)
	w.add(6*time.Second, Error, ms(1))
	// Window 2 (window 1 is empty): one request.
	w.add(25*time.Second, OK, ms(7))
	// Due before the end (30 s) but sent just after it: the last window.
	w.add(30*time.Second+5*time.Millisecond, OK, ms(7))
	if err := w.settleUntil(12 * time.Second); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("window 0 written before it settled: %s", buf.String())
	}
	if err := w.settleUntil(23 * time.Second); err != nil {
		t.Fatal(err)
	}
	w.add(9*time.Second, OK, ms(1)) // a straggler of a written window
	if err := w.writeUpTo(5); err != nil {
		t.Fatal(err)
	}
	var got []Record
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if len(got) != 3 {
		t.Fatalf("%d records, want 3 (30 s in 10 s windows)", len(got))
	}
	f := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprintf("%.3f", *p)
	}
	for _, tc := range []struct {
		name                           string
		r                              Record
		sent, ok, errs, timeouts, lost int
		expected                       float64
		p50, p95, p99                  string
	}{
		// 21 samples (20 OK, one timeout at 2 s): nearest rank 11, 20, 21.
		{"window 0", got[0], 22, 20, 1, 1, 2, 20, "0.011", "0.020", "2.000"},
		{"window 1 is empty", got[1], 0, 0, 0, 0, 0, 20, "none", "none", "none"},
		{"window 2 takes the request sent past the end", got[2], 2, 2, 0, 0, 0, 20, "0.007", "0.007", "0.007"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			if r.Sent != tc.sent || r.OK != tc.ok || r.Errors != tc.errs || r.Timeouts != tc.timeouts || r.Lost != tc.lost || r.Expected != tc.expected {
				t.Errorf("record %+v, want sent %d ok %d errors %d timeouts %d lost %d expected %g", r, tc.sent, tc.ok, tc.errs, tc.timeouts, tc.lost, tc.expected)
			}
			if f(r.P50) != tc.p50 || f(r.P95) != tc.p95 || f(r.P99) != tc.p99 {
				t.Errorf("percentiles %s %s %s, want %s %s %s", f(r.P50), f(r.P95), f(r.P99), tc.p50, tc.p95, tc.p99)
			}
		})
	}
	if w.late != 1 {
		t.Errorf("%d late requests, want 1", w.late)
	}
}

func testRunConfig(target string, rate float64) Config {
	return Config{Target: target, Series: Series{Starts: []time.Duration{0}, Rates: []float64{rate}},
		Duration: 2 * time.Second, MaxRequests: 1000, MaxRate: 100, Timeout: 2 * time.Second, Seed: 11,
		Window: time.Second, RequestsPerConn: 5}
}

// startApp serves a testapp on a free loopback port until the test ends.
func startApp(t *testing.T, cfg testapp.Config) (*testapp.Server, *prometheus.Registry, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	app, err := testapp.New(cfg, clocktesting.NewFakePassiveClock(time.Now()), reg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := testapp.Listen(context.Background(), "127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- testapp.ServeAll(ctx, app, time.Second, 5*time.Second, &testapp.Served{Listener: l, Handler: app.Handler()})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return app, reg, "http://" + l.Addr().String()
}

func readRecords(t *testing.T, b []byte) []Record {
	t.Helper()
	var out []Record
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var r Record
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func TestRunAgainstTestapp(t *testing.T) {
	const burn = 10 * time.Millisecond
	_, appReg, base := startApp(t, testapp.Config{CPU: burn, MemoryPerRequest: 1 << 20, BaseMemory: 1 << 20,
		MaxCPU: time.Second, MaxMemory: 16 << 20, MaxSleep: 5 * time.Second})
	cfg := testRunConfig(base+"/?cpu="+burn.String(), 20)
	reg := prometheus.NewRegistry()
	var buf bytes.Buffer
	sum, err := Run(context.Background(), cfg, reg, &buf)
	if err != nil {
		t.Fatal(err)
	}
	// The arrivals are the pacer's, whatever the server did.
	want := len(arrivals(cfg.Series, cfg.Seed, cfg.Duration, cfg.MaxRequests))
	if sum.Sent != want || sum.OK != want || sum.Errors != 0 || sum.Timeouts != 0 {
		t.Errorf("summary %+v, want %d sent and all OK", sum, want)
	}
	if got := testutil.ToFloat64(gatherCounter(t, appReg, testapp.RequestsMetric, "code", "200")); int(got) != want {
		t.Errorf("the app served %g requests, want %d", got, want)
	}
	if got := testutil.ToFloat64(gatherCounter(t, reg, RequestsMetric, "result", "sent")); int(got) != want {
		t.Errorf("%s{result=sent} %g, want %d", RequestsMetric, got, want)
	}
	recs := readRecords(t, buf.Bytes())
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2 (2 s in 1 s windows)", len(recs))
	}
	total := 0
	for _, r := range recs {
		total += r.Sent
		if r.Sent > 0 && (r.P50 == nil || *r.P50 < burn.Seconds()) {
			t.Errorf("window %d: p50 %v below the CPU burn of %s", r.Window, r.P50, burn)
		}
		if r.Expected != 20 {
			t.Errorf("window %d: expected %g arrivals, want 20", r.Window, r.Expected)
		}
	}
	if total != want {
		t.Errorf("the records hold %d requests, want %d", total, want)
	}
}

// gatherCounter returns the collector of one labelled series of name in
// reg, for testutil.ToFloat64.
func gatherCounter(t *testing.T, reg *prometheus.Registry, name, label, value string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "x"}, func() float64 { return m.GetCounter().GetValue() })
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return nil
}

func TestRunCountsLostRequests(t *testing.T) {
	_, _, base := startApp(t, testapp.Config{MaxCPU: time.Second, MaxMemory: 1 << 20, MaxSleep: 5 * time.Second})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + closed.Addr().String() + "/"
	closed.Close()
	for _, tc := range []struct {
		name                   string
		target                 string
		timeout                time.Duration
		wantTimeouts, wantErrs bool
	}{
		{"slower than the timeout", base + "/?sleep=1s", 200 * time.Millisecond, true, false},
		{"an error status", base + "/?cpu=bad", time.Second, false, true},
		{"connection refused", refused, time.Second, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testRunConfig(tc.target, 10)
			cfg.Duration, cfg.Timeout = time.Second, tc.timeout
			var buf bytes.Buffer
			sum, err := Run(context.Background(), cfg, prometheus.NewRegistry(), &buf)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Sent == 0 || sum.OK != 0 || (sum.Timeouts == sum.Sent) != tc.wantTimeouts || (sum.Errors == sum.Sent) != tc.wantErrs {
				t.Errorf("summary %+v, want every request lost (timeouts %v, errors %v)", sum, tc.wantTimeouts, tc.wantErrs)
			}
			lost := 0
			for _, r := range readRecords(t, buf.Bytes()) {
				lost += r.Lost
			}
			if lost != sum.Sent {
				t.Errorf("records count %d lost, want %d", lost, sum.Sent)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(*Options)
		wantErr string
	}{
		{"valid", func(*Options) {}, ""},
		{"no duration", func(o *Options) { o.Duration = 0 }, "--duration is required"},
		{"too long", func(o *Options) { o.Duration = 3 * time.Hour }, "--duration is required, in (0, 2h0m0s]"},
		{"not loopback", func(o *Options) { o.Target = "http://192.0.2.1/" }, `--target: target "http://192.0.2.1/": host "192.0.2.1" is not loopback`},
		{"no target", func(o *Options) { o.Target = "" }, "--target is required"},
		{"both series", func(o *Options) { o.RatesFile = "r.csv" }, "exactly one of --rates and --trace"},
		{"unknown trace", func(o *Options) { o.Trace = "zigzag" }, `--trace "zigzag"`},
		{"metrics off loopback", func(o *Options) { o.MetricsAddress = "0.0.0.0:9000" }, "--metrics-address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := NewOptions()
			o.Target, o.Trace, o.Duration = "http://127.0.0.1:8080/", "steady", time.Minute
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
	t.Run("a missing rates file", func(t *testing.T) {
		o := NewOptions()
		o.Target, o.RatesFile, o.Duration = "http://127.0.0.1:8080/", "/nonexistent.csv", time.Minute
		if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), "/nonexistent.csv") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a series above the maximum rate", func(t *testing.T) {
		o := NewOptions()
		o.Target, o.Trace, o.Duration, o.Mean, o.MaxRate = "http://127.0.0.1:8080/", "steady", time.Minute, 50, 20
		if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), "peaks at 50 requests/s, above the maximum rate 20") {
			t.Fatalf("error %v", err)
		}
	})
}

// TestCommand runs the command as main does. Logging flags apply once per
// process, so only one case gets past them.
func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{"help", []string{"--help"}, 0, "--requests-per-connection"},
		{"off loopback", []string{"--target", "http://203.0.113.9/", "--trace", "steady", "--duration", "1s"}, 1, "is not loopback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := NewCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			if code := cli.RunWithArgs(cmd, tc.args, &out); code != tc.wantCode {
				t.Errorf("exit code %d, want %d\n%s", code, tc.wantCode, out.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out.String())
			}
		})
	}
}
