package bench

import "testing"

func TestLoopMarker(t *testing.T) {
	type req struct {
		method, path string
		watch        bool
		want         bool
	}
	for _, tc := range []struct {
		name      string
		component string
		reqs      []req
	}{
		{"our recommender lists pod metrics of all namespaces", "aware-recommender", []req{
			{"GET", "/apis/metrics.k8s.io/v1beta1/pods", false, true},
			{"GET", "/apis/metrics.k8s.io/v1beta1/namespaces/bench/pods", false, true},
			{"GET", "/apis/metrics.k8s.io/v1beta1/pods", true, false},
			{"GET", "/apis/metrics.k8s.io/v1beta1/nodes", false, false},
			{"GET", "/api/v1/namespaces/bench/pods", false, false},
			{"PUT", "/apis/autoscaling.aware.dev/v1alpha1/namespaces/bench/multidimpodautoscalers/a/status", false, false},
		}},
		{"VPA's recommender the same", "vpa-recommender", []req{
			{"GET", "/apis/metrics.k8s.io/v1beta1/pods", false, true},
			{"POST", "/apis/metrics.k8s.io/v1beta1/pods", false, false},
		}},
		{"our updater reads our admission controller's Lease", "aware-updater", []req{
			{"GET", "/apis/coordination.k8s.io/v1/namespaces/aware-system/leases/aware-admission-controller", false, true},
			{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vpa-admission-controller", false, false},
			{"PUT", "/apis/coordination.k8s.io/v1/namespaces/aware-system/leases/aware-admission-controller", false, false},
			{"GET", "/apis/metrics.k8s.io/v1beta1/pods", false, false},
		}},
		{"VPA's updater reads VPA's admission controller's Lease", "vpa-updater", []req{
			{"GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/vpa-admission-controller", false, true},
			{"GET", "/apis/coordination.k8s.io/v1/namespaces/aware-system/leases/aware-admission-controller", false, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := LoopMarker(tc.component)
			if m == nil {
				t.Fatal("no marker")
			}
			for _, r := range tc.reqs {
				if got := m(r.method, r.path, r.watch); got != r.want {
					t.Errorf("%s %s watch=%v: got %v, want %v", r.method, r.path, r.watch, got, r.want)
				}
			}
		})
	}
	t.Run("unknown component", func(t *testing.T) {
		if LoopMarker("aware-admission-controller") != nil {
			t.Fatal("a marker for a component without loops")
		}
	})
}

func TestMarkersMatchLoops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		markers int64
		loops   float64
		want    bool
	}{
		{"the last loop still running", 6, 5, true},
		{"the last loop already ended", 6, 6, true},
		{"a loop made the request twice", 12, 6, false},
		{"loops without the request", 3, 6, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MarkersMatchLoops(tc.markers, tc.loops); got != tc.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}
