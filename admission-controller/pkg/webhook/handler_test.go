package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/serve"
)

// fakeMatcher returns mpa or err; block waits for the context; boom panics.
type fakeMatcher struct {
	mpa   *v1alpha1.MultidimPodAutoscaler
	err   error
	block bool
	boom  bool
	// gotNamespace records the namespace of the last pod seen.
	gotNamespace string
}

var _ Matcher = (*fakeMatcher)(nil)

func (f *fakeMatcher) Match(ctx context.Context, pod *corev1.Pod) (*v1alpha1.MultidimPodAutoscaler, error) {
	f.gotNamespace = pod.Namespace
	if f.boom {
		panic("matcher bug")
	}
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return f.mpa, f.err
}

func mpaWithRec(cpu string) *v1alpha1.MultidimPodAutoscaler {
	return &v1alpha1.MultidimPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m"},
		Status: v1alpha1.MultidimPodAutoscalerStatus{Recommendation: &v1alpha1.RecommendedPodResources{
			ContainerRecommendations: []v1alpha1.RecommendedContainerResources{{ContainerName: "app", Target: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}},
		}},
	}
}

// boosted gives m a 3x CPU start-up boost for every container.
func boosted(m *v1alpha1.MultidimPodAutoscaler) *v1alpha1.MultidimPodAutoscaler {
	f := 3.0
	m.Spec.ResourcePolicy = &v1alpha1.PodResourcePolicy{ContainerPolicies: []v1alpha1.ContainerResourcePolicy{{
		ContainerName: "*", StartupBoost: &v1alpha1.StartupBoost{CPU: &v1alpha1.CPUStartupBoost{Factor: &f}}}}}
	return m
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "img", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}}}},
	}
}

func reviewBody(t testing.TB, mutate func(*admissionv1.AdmissionReview)) []byte {
	t.Helper()
	raw, err := json.Marshal(testPod())
	if err != nil {
		t.Fatal(err)
	}
	r := &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("uid-1"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: "ns",
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: raw},
		},
	}
	if mutate != nil {
		mutate(r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answer checks the invariants of every answer and returns the response.
func answer(t testing.TB, rec *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer is not JSON: %v: %s", err, rec.Body)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || !out.Response.Allowed {
		t.Fatalf("answer must be an allowed AdmissionReview v1, got %s", rec.Body)
	}
	return out.Response
}

func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      []byte
		matcher   *fakeMatcher
		lrErr     error
		timeout   time.Duration
		maxBody   int64
		result    string
		wantUID   string
		wantPatch string
	}{
		{name: "pod CREATE with an MPA: patched", body: reviewBody(t, nil), matcher: &fakeMatcher{mpa: mpaWithRec("250m")}, result: ResultPatched, wantUID: "uid-1",
			wantPatch: `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"250m"},{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/updates":"container app: cpu request"}}]`},
		{name: "MPA with a 3x CPU start-up boost: boosted and recorded", body: reviewBody(t, nil), matcher: &fakeMatcher{mpa: boosted(mpaWithRec("250m"))}, result: ResultPatched, wantUID: "uid-1",
			wantPatch: `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"750m"},{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/cpu-startup-boost":"{\"app\":{\"boosted\":\"750m\",\"request\":\"250m\"}}","autoscaling.aware.dev/updates":"container app: cpu request, cpu start-up boost"}}]`},
		{name: "boost without recommendation: the pod's own request boosted", body: reviewBody(t, nil), matcher: &fakeMatcher{mpa: boosted(&v1alpha1.MultidimPodAutoscaler{})}, result: ResultPatched, wantUID: "uid-1",
			wantPatch: `[{"op":"replace","path":"/spec/containers/0/resources/requests/cpu","value":"300m"},{"op":"add","path":"/metadata/annotations","value":{"autoscaling.aware.dev/cpu-startup-boost":"{\"app\":{\"boosted\":\"300m\",\"request\":\"100m\"}}","autoscaling.aware.dev/updates":"container app: cpu request, cpu start-up boost"}}]`},
		{name: "already sized: unchanged", body: reviewBody(t, nil), matcher: &fakeMatcher{mpa: mpaWithRec("100m")}, result: ResultUnchanged, wantUID: "uid-1"},
		{name: "MPA without recommendation: unchanged", body: reviewBody(t, nil), matcher: &fakeMatcher{mpa: &v1alpha1.MultidimPodAutoscaler{}}, result: ResultUnchanged, wantUID: "uid-1"},
		{name: "no MPA: skipped", body: reviewBody(t, nil), matcher: &fakeMatcher{}, result: ResultSkipped, wantUID: "uid-1"},
		{name: "UPDATE: skipped", body: reviewBody(t, func(r *admissionv1.AdmissionReview) { r.Request.Operation = admissionv1.Update }), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultSkipped, wantUID: "uid-1"},
		{name: "wrong kind: skipped", body: reviewBody(t, func(r *admissionv1.AdmissionReview) {
			r.Request.Kind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
		}), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultSkipped, wantUID: "uid-1"},
		{name: "subresource: skipped", body: reviewBody(t, func(r *admissionv1.AdmissionReview) { r.Request.SubResource = "binding" }), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultSkipped, wantUID: "uid-1"},
		{name: "missing request: invalid", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultInvalid},
		{name: "v1beta1 review: invalid", body: bytes.Replace(reviewBody(t, nil), []byte(`admission.k8s.io/v1"`), []byte(`admission.k8s.io/v1beta1"`), 1), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultInvalid},
		{name: "unknown field: invalid", body: bytes.Replace(reviewBody(t, nil), []byte(`"request":{`), []byte(`"request":{"surprise":1,`), 1), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultInvalid},
		{name: "garbage: invalid", body: []byte("\x00\xffnot json"), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultInvalid},
		{name: "empty body: invalid", body: nil, matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultInvalid},
		{name: "pod that is not a pod: invalid", body: reviewBody(t, func(r *admissionv1.AdmissionReview) { r.Request.Object.Raw = []byte(`{"spec":{"containers":"x"}}`) }), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultInvalid, wantUID: "uid-1"},
		{name: "body over the limit: invalid", body: reviewBody(t, nil), maxBody: 100, matcher: &fakeMatcher{mpa: mpaWithRec("1")}, result: ResultInvalid},
		{name: "matcher error: error", body: reviewBody(t, nil), matcher: &fakeMatcher{err: errors.New("apiserver down")}, result: ResultError, wantUID: "uid-1"},
		{name: "LimitRange error: error", body: reviewBody(t, nil), matcher: &fakeMatcher{mpa: mpaWithRec("1")}, lrErr: errors.New("no cache"), result: ResultError, wantUID: "uid-1"},
		{name: "matcher panics: error", body: reviewBody(t, nil), matcher: &fakeMatcher{boom: true}, result: ResultError, wantUID: "uid-1"},
		{name: "matcher hangs: timeout", body: reviewBody(t, nil), matcher: &fakeMatcher{block: true}, timeout: 50 * time.Millisecond, result: ResultTimeout, wantUID: "uid-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			h := &Handler{Matcher: tc.matcher, Metrics: m, Timeout: tc.timeout, MaxBodyBytes: tc.maxBody,
				LimitRanges: LimitRangesFunc(func(string) ([]*corev1.LimitRange, error) { return nil, tc.lrErr })}
			rec := httptest.NewRecorder()
			start := time.Now()
			Mux("/mutate-pods", h, m).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader(tc.body)))
			if d := time.Since(start); d > time.Second {
				t.Fatalf("answer took %v", d)
			}
			resp := answer(t, rec)
			if string(resp.UID) != tc.wantUID {
				t.Fatalf("uid %q, want %q", resp.UID, tc.wantUID)
			}
			if string(resp.Patch) != tc.wantPatch {
				t.Fatalf("patch %s, want %s", resp.Patch, tc.wantPatch)
			}
			if (resp.PatchType != nil) != (tc.wantPatch != "") {
				t.Fatalf("patchType %v with patch %q", resp.PatchType, resp.Patch)
			}
			for _, r := range Results {
				want := 0.0
				if r == tc.result {
					want = 1
				}
				if got := testutil.ToFloat64(m.requests.WithLabelValues(r)); got != want {
					t.Errorf("requests_total{result=%q} = %v, want %v", r, got, want)
				}
			}
			if got := testutil.CollectAndCount(m.duration); got != 1 {
				t.Errorf("duration histogram has %d series", got)
			}
			if tc.result == ResultPatched && tc.matcher.gotNamespace != "ns" {
				t.Errorf("pod namespace %q, want the request's", tc.matcher.gotNamespace)
			}
		})
	}
}

func TestHandlerRejectsGET(t *testing.T) {
	rec := httptest.NewRecorder()
	(&Handler{Matcher: &fakeMatcher{}}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/mutate-pods", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET answered %d", rec.Code)
	}
}

type panicHandler struct{}

func (panicHandler) ServeHTTP(http.ResponseWriter, *http.Request) { panic("handler bug") }

func TestRecover(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	Mux("/mutate-pods", panicHandler{}, m).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", strings.NewReader("{}")))
	if resp := answer(t, rec); resp.Patch != nil {
		t.Fatal("panic answered with a patch")
	}
	if got := testutil.ToFloat64(m.requests.WithLabelValues(ResultError)); got != 1 {
		t.Fatalf("panic not counted: %v", got)
	}
}

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.observe(ResultPatched, time.Now())
	if err := serve.LintMetrics(reg, "admission"); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); err == nil {
		t.Fatal("registering twice must fail")
	}
}
