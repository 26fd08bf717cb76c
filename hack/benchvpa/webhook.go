//go:build benchvpa

package main

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
	"os"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// webhookTarget is one side's admission endpoint.
type webhookTarget struct {
	side string
	url  string
	proc *proc
}

// reviewBodies returns n AdmissionReview requests (v1, pod CREATE) for pod,
// each with its own UID, as the API server sends them; requestKind and
// requestResource are set, as the API server always sets them.
func reviewBodies(pod *corev1.Pod, n int) ([][]byte, error) {
	raw, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	gvr := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	out := make([][]byte, n)
	for i := range out {
		uid := podUID(i)
		rev := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID: uid, Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
				Namespace: pod.Namespace, Operation: admissionv1.Create,
				UserInfo: authUser, Object: rawExt(raw), Options: rawExt([]byte(`{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}`)),
				DryRun: new(bool),
			},
		}
		if out[i], err = json.Marshal(&rev); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// loadClient is one side's HTTP client, counting the connections it opens.
type loadClient struct {
	*http.Client
	dials atomic.Int64
}

// webhookClient trusts the testbed CA and speaks HTTP/1.1 with keep-alive,
// as the API server's webhook client does: k8s.io/apiserver's
// pkg/util/webhook/client.go offers only "http/1.1" in ALPN, so that
// requests spread over connections (and a webhook's replicas) rather than
// share one HTTP/2 connection. A measured run opens no connection once the
// warm-up has opened them (runLoad counts them).
func webhookClient(caFile string, conns int) (*loadClient, error) {
	pemData, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	c := &loadClient{}
	var d net.Dialer
	c.Client = &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c.dials.Add(1)
				return d.DialContext(ctx, network, addr)
			},
			MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns,
		},
	}
	return c, nil
}

// checkPatched sends one review and fails unless the answer allows the pod
// with a non-empty JSON patch: a side that does not mutate would be measured
// doing less work.
func checkPatched(ctx context.Context, c *loadClient, t webhookTarget, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%s webhook: %w", t.side, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s webhook: HTTP %d: %s", t.side, resp.StatusCode, data)
	}
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &rev); err != nil {
		return fmt.Errorf("%s webhook: %w", t.side, err)
	}
	if rev.Response == nil || !rev.Response.Allowed || len(rev.Response.Patch) == 0 {
		return fmt.Errorf("%s webhook did not patch the pod: %s", t.side, data)
	}
	return nil
}

// loadResult is one run of requests against one side.
type loadResult struct {
	latencies []float64 // ms
	errors    int
	elapsed   time.Duration
	cpu       float64 // server CPU seconds during the run
	dials     int     // connections (TLS handshakes) the client opened
	wakeups   uint64  // times one of the server's threads was put on a CPU
}

// runLoad sends the bodies to t. rate > 0 is open loop: request i is due at
// start + i/rate and its latency counts from then, so a server that falls
// behind is charged for the queue it causes (no coordinated omission); at
// most conns requests are in flight. rate == 0 is closed loop: conns
// clients each send their next request when the previous one is answered.
func runLoad(ctx context.Context, c *loadClient, t webhookTarget, bodies [][]byte, rate float64, conns int, budget time.Duration) (loadResult, error) {
	before, err := t.proc.sample()
	if err != nil {
		return loadResult{}, err
	}
	dials := c.dials.Load()
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	lat := make([]float64, len(bodies))
	sent := make([]bool, len(bodies))
	var errs atomic.Int64
	send := func(i int, due time.Time) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(bodies[i]))
		if err != nil {
			errs.Add(1)
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				errs.Add(1)
			}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs.Add(1)
			return
		}
		lat[i] = float64(time.Since(due)) / float64(time.Millisecond)
		sent[i] = true
	}
	start := time.Now()
	var wg sync.WaitGroup
	if rate > 0 {
		sem := make(chan struct{}, conns)
		for i := range bodies {
			due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				break
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
			}
			if ctx.Err() != nil {
				break
			}
			wg.Go(func() {
				defer func() { <-sem }()
				send(i, due)
			})
		}
	} else {
		var next atomic.Int64
		for range conns {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= len(bodies) {
						return
					}
					send(i, time.Now())
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, err := t.proc.sample()
	if err != nil {
		return loadResult{}, err
	}
	res := loadResult{errors: int(errs.Load()), elapsed: elapsed, cpu: after.cpu - before.cpu, dials: int(c.dials.Load() - dials),
		wakeups: after.slices - before.slices}
	for i, ok := range sent {
		if ok {
			res.latencies = append(res.latencies, lat[i])
		}
	}
	return res, nil
}
