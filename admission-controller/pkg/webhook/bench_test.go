package webhook

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// discardWriter is a ResponseWriter that keeps only the answer's size, so
// that a benchmark counts the handler's allocations, not a recorder's.
type discardWriter struct {
	header http.Header
	n      int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { w.n += len(b); return len(b), nil }

// apiServerPod is a pod as the API server sends a ReplicaSet's new pod to
// the webhook: defaulted, owned, one container with requests (the shape
// hack/benchvpa admits).
func apiServerPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-7d4b9c8f6-", Namespace: "ns",
			Labels: map[string]string{"app": "web", "pod-template-hash": "7d4b9c8f6"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6",
				UID: "5b1c7f0e-0d1f-4a57-9b51-3f3c8a2f2b10", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi")}},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent}},
			RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To(int64(0)),
			DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "default", SchedulerName: "default-scheduler",
			SecurityContext: &corev1.PodSecurityContext{}, EnableServiceLinks: ptr.To(true), PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority),
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))}},
		},
	}
}

// BenchmarkServeAdmission is the handler's own cost per review, the part
// of a request that is ours (decode, decide, patch, encode, metrics): no
// TLS, no HTTP parsing, no recorder, the MPA found by a fake matcher
// (BenchmarkMatch1000 measures the lookup), through the guarded goroutine
// or, when the matcher answers from memory, on the caller's goroutine. Read B/op and allocs/op
// beside ns/op: allocations are what the collector later pays for.
func BenchmarkServeAdmission(b *testing.B) {
	raw, err := json.Marshal(apiServerPod())
	if err != nil {
		b.Fatal(err)
	}
	gvk := metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
	gvr := metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "00000000-0000-0000-0000-000000000001", Kind: gvk, Resource: gvr,
			RequestKind: &gvk, RequestResource: &gvr, Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name      string
		mpa       bool
		cached    bool // the matcher answers from memory (CachedMatcher)
		wantPatch bool
	}{
		{name: "patched", mpa: true, wantPatch: true},
		{name: "patched, match from memory", mpa: true, cached: true, wantPatch: true},
		{name: "no MPA", mpa: false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			var mpa *v1alpha1.MultidimPodAutoscaler
			if bc.mpa {
				mpa = mpaWithRec("250m")
			}
			var matcher Matcher = &fakeMatcher{mpa: mpa}
			if bc.cached {
				matcher = &cachedMatcher{mpa: mpa, ok: true}
			}
			h := &Handler{Matcher: matcher, Metrics: m}
			// The answer is checked once, outside the loop.
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader(body)))
			if resp := answer(b, rec); (len(resp.Patch) > 0) != bc.wantPatch {
				b.Fatalf("patch %q, want one: %v", resp.Patch, bc.wantPatch)
			}
			r := httptest.NewRequest(http.MethodPost, "/mutate-pods", nil)
			rd := bytes.NewReader(body)
			w := &discardWriter{header: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				rd.Reset(body)
				r.Body = io.NopCloser(rd)
				clear(w.header)
				h.ServeHTTP(w, r)
			}
		})
	}
}
