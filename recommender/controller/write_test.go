package controller

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
)

// RESTStatusWriter PUTs the object to the status subresource and does not
// decode a successful answer (the typed client, given the same answer,
// fails decoding it); errors still come back typed.
func TestRESTStatusWriter(t *testing.T) {
	conflict, _ := json.Marshal(apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "multidimpodautoscalers"}, "m", nil).ErrStatus)
	notFound, _ := json.Marshal(apierrors.NewNotFound(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "multidimpodautoscalers"}, "m").ErrStatus)
	for _, tc := range []struct {
		name      string
		code      int
		body      string
		check     func(error) bool
		typedFail bool // the typed client's writer fails on the same answer
	}{
		{"success, answer not decoded", http.StatusOK, "not an object", func(err error) bool { return err == nil }, true},
		{"conflict", http.StatusConflict, string(conflict), apierrors.IsConflict, false},
		{"not found", http.StatusNotFound, string(notFound), apierrors.IsNotFound, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type seen struct {
				method, path string
				obj          v1alpha1.MultidimPodAutoscaler
			}
			got := make(chan seen, 2)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var s seen
				s.method, s.path = r.Method, r.URL.Path
				b, _ := io.ReadAll(r.Body)
				_ = json.Unmarshal(b, &s.obj)
				got <- s
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.code)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			client, err := versioned.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			obj := &v1alpha1.MultidimPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", ResourceVersion: "7"},
				Status: v1alpha1.MultidimPodAutoscalerStatus{DesiredReplicas: 3}}
			err = RESTStatusWriter{Client: client.AutoscalingV1alpha1().RESTClient()}.WriteStatus(context.Background(), obj)
			if !tc.check(err) {
				t.Fatalf("error %v", err)
			}
			s := <-got
			if s.method != http.MethodPut || s.path != "/apis/autoscaling.aware.dev/v1alpha1/namespaces/ns/multidimpodautoscalers/m/status" {
				t.Fatalf("%s %s", s.method, s.path)
			}
			if s.obj.Name != "m" || s.obj.ResourceVersion != "7" || s.obj.Status.DesiredReplicas != 3 {
				t.Fatalf("sent %+v", s.obj)
			}
			typedErr := typedStatusWriter{client}.WriteStatus(context.Background(), obj)
			<-got
			if (typedErr != nil) != (tc.typedFail || tc.code != http.StatusOK) {
				t.Fatalf("typed writer: %v", typedErr)
			}
		})
	}
}

func TestStatusWrittenOnlyWhenChangedOrDue(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	f.start()
	if n := len(statusUpdates(t, f.tick())); n != 1 {
		t.Fatalf("first loop: %d updates, want 1", n)
	}
	// Warm up: with little history VPA's confidence bounds move quickly
	// and are rightly rewritten; after a few hours they settle.
	for range 300 {
		f.clock.Step(time.Minute)
		f.tick()
	}
	// Wait for the periodic refresh, then expect exactly one write per
	// refresh interval while only currentMetrics moves.
	for i := 0; ; i++ {
		if i > 5 {
			t.Fatal("no write within the status refresh interval")
		}
		f.clock.Step(time.Minute)
		if len(statusUpdates(t, f.tick())) == 1 {
			break
		}
	}
	last := f.mpa("ns", "web").Status.RecommendationTime.Time
	for i := 1; i < 5; i++ {
		f.clock.Step(time.Minute)
		f.usage.set(podUsage("ns", "web-1", 0.4+float64(i)/1000, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
		if ups := statusUpdates(t, f.tick()); len(ups) != 0 {
			t.Fatalf("loop %d rewrote an unchanged status", i)
		}
	}
	f.clock.Step(time.Minute) // 5 minutes since the last write
	if n := len(statusUpdates(t, f.tick())); n != 1 {
		t.Fatalf("refresh: %d updates, want 1", n)
	}
	if got := f.mpa("ns", "web").Status.RecommendationTime.Time; !got.Equal(last.Add(5 * time.Minute)) {
		t.Fatalf("recommendationTime %v, want %v", got, last.Add(5*time.Minute))
	}
	// The transition time of a condition that kept its status is kept.
	if c := cond(t, f.mpa("ns", "web"), v1alpha1.RecommendationProvided); !c.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("RecommendationProvided lastTransitionTime moved to %v", c.LastTransitionTime)
	}
}

func TestConflictOnStatusWrite(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	f.start()
	// Another component (the updater) writes lastScaleTime after our cache
	// was filled; our first write conflicts once.
	scaled := metav1.NewTime(t0.Add(-time.Minute))
	m := f.mpa("ns", "web")
	m.Status.LastScaleTime = &scaled
	if _, err := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers("ns").UpdateStatus(context.Background(), m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	conflicts := 0
	f.client.PrependReactor("update", "multidimpodautoscalers", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupName, Resource: "multidimpodautoscalers"}, "web", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	actions := f.tick()
	var verbs []string
	for _, a := range actions {
		verbs = append(verbs, a.GetVerb()+"/"+a.GetSubresource())
	}
	if got := strings.Join(verbs, " "); got != "update/status get/ update/status" {
		t.Fatalf("actions %q, want a conflicting update, a re-read from the API and a second update", got)
	}
	m = f.mpa("ns", "web")
	if m.Status.RecommendationTime == nil {
		t.Fatal("status not written after the conflict")
	}
	if m.Status.LastScaleTime == nil || !m.Status.LastScaleTime.Equal(&scaled) {
		t.Fatalf("lastScaleTime written by another component was lost: %v", m.Status.LastScaleTime)
	}
	if got := testutil.ToFloat64(f.c.metrics.statusWrites.WithLabelValues("conflict")); got != 1 {
		t.Errorf("conflict counter %g", got)
	}
}

func TestPersistentWriteErrorIsRetriedWithBackoff(t *testing.T) {
	f := newFixture(t, twoPodWorkload()...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20))
	f.start()
	f.client.PrependReactor("update", "multidimpodautoscalers", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd down")
	})
	f.c.RunOnce(context.Background())
	f.c.processNext(context.Background())
	if n := f.c.writes.queue.NumRequeues("ns/web"); n != 1 {
		t.Fatalf("requeues %d, want 1 (rate-limited retry)", n)
	}
	if got := testutil.ToFloat64(f.c.metrics.statusWrites.WithLabelValues("error")); got != 1 {
		t.Errorf("error counter %g", got)
	}
	f.c.writes.queue.ShutDown()
}
