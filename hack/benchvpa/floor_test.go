//go:build benchvpa

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestFloorHandler(t *testing.T) {
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", UID: "not-the-request-uid"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
	bodies, err := reviewBodies(pod, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		body     []byte
		wantCode int
		wantUID  string
	}{
		{name: "the request's uid comes back, not the pod's", body: bodies[1], wantCode: http.StatusOK, wantUID: string(podUID(1))},
		{name: "a body without a uid is refused", body: []byte(`{"kind":"AdmissionReview"}`), wantCode: http.StatusBadRequest},
		{name: "an unterminated uid is refused", body: []byte(`{"request":{"uid":"abc`), wantCode: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			floorHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(tc.body)))
			if rec.Code != tc.wantCode {
				t.Fatalf("HTTP %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			if tc.wantCode != http.StatusOK {
				return
			}
			var rev admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &rev); err != nil {
				t.Fatal(err)
			}
			r := rev.Response
			if rev.APIVersion != "admission.k8s.io/v1" || rev.Kind != "AdmissionReview" || r == nil || string(r.UID) != tc.wantUID || !r.Allowed ||
				r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("answer %s", rec.Body)
			}
			var ops []map[string]any
			if err := json.Unmarshal(r.Patch, &ops); err != nil || len(ops) != 2 {
				t.Errorf("patch %s: %d operations, %v; want 2 JSON patch operations", r.Patch, len(ops), err)
			}
		})
	}
}

// TestRunLoadReusesConnections holds the harness to what the API server
// does: HTTP/1.1 (even to a server that offers HTTP/2) on connections kept
// alive, so that once the warm-up has opened them a measured run makes no
// TLS handshake.
func TestRunLoadReusesConnections(t *testing.T) {
	var h2 atomic.Int64
	floor := floorHandler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 {
			h2.Add(1)
		}
		floor.ServeHTTP(w, r)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := webhookClient(caFile, fixedRateConns)
	if err != nil {
		t.Fatal(err)
	}
	self := &proc{name: "test", done: make(chan struct{})}
	self.pid.Store(int64(os.Getpid()))
	target := webhookTarget{side: floorSide, url: srv.URL, proc: self}
	bodies, err := reviewBodies(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}, 200)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	warm, err := runLoad(ctx, c, target, bodies, 0, fixedRateConns, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if warm.dials == 0 || warm.dials > fixedRateConns {
		t.Fatalf("warm-up opened %d connections, want 1..%d", warm.dials, fixedRateConns)
	}
	for _, run := range []struct {
		name  string
		rate  float64
		conns int
	}{{"fixed rate", 2000, fixedRateConns}, {"closed loop", 0, 8}} {
		t.Run(run.name, func(t *testing.T) {
			res, err := runLoad(ctx, c, target, bodies, run.rate, run.conns, 30*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if res.errors != 0 || len(res.latencies) != len(bodies) {
				t.Errorf("%d answered, %d failed, want %d answered", len(res.latencies), res.errors, len(bodies))
			}
			if res.dials != 0 {
				t.Errorf("%d connections opened after the warm-up, want 0", res.dials)
			}
		})
	}
	if n := h2.Load(); n != 0 {
		t.Errorf("%d requests over HTTP/2, want HTTP/1.1 as the API server speaks to webhooks", n)
	}
}
