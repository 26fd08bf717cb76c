package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	scalefake "k8s.io/client-go/scale/fake"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/admission-controller/pkg/match"
	"github.com/aware-k8s/aware/pkg/kube/certs"
	"github.com/aware-k8s/aware/pkg/kube/target"
)

// staticOwners maps ReplicaSet "<name>-rs" to Deployment "<name>", like a
// synced ReplicaSet informer would.
type staticOwners struct{}

var _ match.Owners = staticOwners{}

func (staticOwners) Controller(_ context.Context, _ string, obj match.Ref) (*match.Ref, error) {
	if obj.Kind != "ReplicaSet" || len(obj.Name) < 4 {
		return nil, nil
	}
	return &match.Ref{Group: "apps", Kind: "Deployment", Name: obj.Name[:len(obj.Name)-3]}, nil
}

// benchHandler is the handler of the last loopbackServer.
var benchHandler http.Handler

// loopbackServer serves the real handler (real Matcher over an informer
// index of n MPAs, selectors through the scale-client cache) over TLS on
// 127.0.0.1, and returns its URL and a client that trusts it.
func loopbackServer(t testing.TB, n int) (url string, client *http.Client, stop func()) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{match.TargetIndex: match.TargetIndexFunc, cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		m := mpaWithRec("250m")
		m.Namespace, m.Name = fmt.Sprintf("ns-%d", i%10), name
		m.Spec.ScaleTargetRef = &autoscalingv1.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
		if err := idx.Add(m); err != nil {
			t.Fatal(err)
		}
	}
	scales := &scalefake.FakeScaleClient{}
	scales.AddReactor("get", "deployments", func(a core.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{Status: autoscalingv1.ScaleStatus{Selector: "app=web"}}, nil
	})
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "apps", Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	h := &Handler{
		Matcher:     &match.Matcher{MPAs: &match.InformerIndex{Indexer: idx}, Owners: staticOwners{}, Selectors: target.New(mapper, scales, &fakediscovery.FakeDiscovery{Fake: &core.Fake{}})},
		LimitRanges: LimitRangesFunc(func(string) ([]*corev1.LimitRange, error) { return nil, nil }),
	}
	reg := prometheus.NewRegistry()
	if h.Metrics, _ = NewMetrics(reg); h.Metrics == nil {
		t.Fatal("metrics")
	}

	ca, err := certs.NewCA("test", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Serving([]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background()))
	done := make(chan error, 1)
	benchHandler = h
	go func() {
		done <- Serve(ctx, ln, Mux("/mutate-pods", h, h.Metrics), TLSConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }), 5*time.Second)
	}()
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Minute,
	}}
	return "https://" + ln.Addr().String() + "/mutate-pods", client, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}
}

// podReview is a review for a pod of Deployment web-<i> in its namespace.
func podReview(t testing.TB, i int) []byte {
	return reviewBody(t, func(r *admissionv1.AdmissionReview) {
		p := testPod()
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("web-%d-rs", i), Controller: ptr.To(true)}}
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		r.Request.Namespace = fmt.Sprintf("ns-%d", i%10)
		r.Request.Object.Raw = raw
	})
}

func post(client *http.Client, url string, body []byte) (*admissionv1.AdmissionResponse, error) {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(b, &out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("status %d, body %q: %v", resp.StatusCode, b, err)
	}
	return out.Response, nil
}

func TestServeTLS(t *testing.T) {
	url, client, stop := loopbackServer(t, 100)
	resp, err := post(client, url, podReview(t, 42))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"250m"},{"op":"replace","path":"/spec/containers/0/resources/limits/cpu","value":"500m"},` +
		`{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/updates":"container app: cpu request, cpu limit"}}]`
	if !resp.Allowed || string(resp.Patch) != want {
		t.Fatalf("got allowed=%v patch %s\nwant %s", resp.Allowed, resp.Patch, want)
	}

	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // only the protocol version is under test
		MaxVersion:         tls.VersionTLS11,
	}}}
	if _, err := post(old, url, podReview(t, 1)); err == nil {
		t.Fatal("TLS 1.1 handshake accepted")
	}
	stop()
	if _, err := post(client, url, podReview(t, 1)); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

// BenchmarkAdmissionTLS sends reviews at 1,000 requests/s over loopback
// TLS, 1,000 MPAs cached, and reports the round-trip latency percentiles a
// client (the API server) sees. Each iteration is one request, so run it
// with e.g. -benchtime=5000x.
//
// The load is open-loop over a fixed pool of benchConns kept-alive
// connections, each carrying one request at a time, as the API server's
// connection pool to a webhook does: request i is due at start+i/rate
// whatever happened to earlier ones. A request that cannot be sent within
// one interval of its due time (every connection was still busy, or the
// generator itself was descheduled) is sent as soon as it can and counted
// in the late-% metric; its latency is timed from when it was sent. So
// p50/p99 are the server's answer times on a bounded number of
// connections, and late-% says how often the server (or the machine)
// could not keep up with the rate; neither hides the other. The conns
// metric is the TLS connections opened, handshakes of the warm-up
// included: more than benchConns means the pool was not fixed.
//
// It runs with Go's default GC target and with the one the admission
// controller is deployed with (GOGC=400, deploy/admission-controller):
// collection cycles, not the handler, set the tail, so the budget is
// checked as deployed and the default shows what the setting buys.
func BenchmarkAdmissionTLS(b *testing.B) {
	for _, gogc := range []int{100, 400} {
		b.Run(fmt.Sprintf("gogc=%d", gogc), func(b *testing.B) {
			defer debug.SetGCPercent(debug.SetGCPercent(gogc))
			benchmarkAdmissionTLS(b)
		})
	}
}

// benchConns is the load generator's connection pool.
const benchConns = 8

func benchmarkAdmissionTLS(b *testing.B) {
	const (
		rate     = 1000
		interval = time.Second / rate
	)
	url, shared, stop := loopbackServer(b, 1000)
	defer stop()
	// A client of its own, capped at benchConns connections, that counts
	// the connections it opens.
	tr := shared.Transport.(*http.Transport).Clone()
	tr.MaxConnsPerHost, tr.MaxIdleConnsPerHost = benchConns, benchConns
	var dials atomic.Int64
	var dialer net.Dialer
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dialer.DialContext(ctx, network, addr)
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: shared.Timeout, Transport: tr}

	bodies := make([][]byte, 1000)
	for i := range bodies {
		bodies[i] = podReview(b, i)
	}
	// Warm every connection and the selector cache, as on a running
	// server: benchConns requests at a time open the whole pool.
	if err := onPool(benchConns, len(bodies), func(i int) error {
		_, err := post(client, url, bodies[i])
		return err
	}, nil); err != nil {
		b.Fatal(err)
	}

	lat := make([]time.Duration, b.N)
	var late atomic.Int64
	b.ResetTimer()
	start := time.Now()
	err := onPool(benchConns, b.N, func(i int) error {
		t0 := time.Now()
		if t0.Sub(start.Add(time.Duration(i)*interval)) > interval {
			late.Add(1)
		}
		resp, err := post(client, url, bodies[i%len(bodies)])
		lat[i] = time.Since(t0)
		if err == nil && len(resp.Patch) == 0 {
			err = fmt.Errorf("request %d: no patch", i)
		}
		return err
	}, func(i int) {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "req/s")
	b.ReportMetric(100*float64(late.Load())/float64(b.N), "late-%")
	b.ReportMetric(float64(dials.Load()), "conns")
}

// onPool runs do(0), …, do(n-1) on workers goroutines, each running one at a
// time, handing out i in order once pace(i) (if not nil) has returned; the
// hand-out waits for a free worker. It returns the first error.
func onPool(workers, n int, do func(i int) error, pace func(i int)) error {
	work := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := do(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		if pace != nil {
			pace(i)
		}
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// BenchmarkHandler is the CPU cost of one admission (decode, match among
// 1,000 cached MPAs, patch, encode) without the network.
func BenchmarkHandler(b *testing.B) {
	url, client, stop := loopbackServer(b, 1000)
	defer stop()
	// Reuse the server's handler through one warm request per target.
	bodies := make([][]byte, 1000)
	for i := range bodies {
		bodies[i] = podReview(b, i)
		if _, err := post(client, url, bodies[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		rec := httptest.NewRecorder()
		benchHandler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader(bodies[i%len(bodies)])))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
		i++
	}
}
