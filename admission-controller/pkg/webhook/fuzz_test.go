package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	kjson "sigs.k8s.io/json"
)

// FuzzServeAdmission feeds arbitrary bodies to the handler. Whatever the
// body, the answer is HTTP 200 with an allowed AdmissionReview v1, and a
// patch, when there is one, applies cleanly to the pod that was sent.
// Run in CI with a bound: go test -run '^$' -fuzz '^FuzzServeAdmission$'
// -fuzztime 60s ./admission-controller/pkg/webhook/
func FuzzServeAdmission(f *testing.F) {
	f.Add(reviewBody(f, nil))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":{"spec":{"containers":[{"name":"app","resources":{"limits":{"cpu":"1"}}}]}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"operation":"CREATE","object":null}}`))
	f.Add([]byte("garbage"))
	f.Add([]byte{})
	h := &Handler{Matcher: &fakeMatcher{mpa: mpaWithRec("250m")}}
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		Mux("/mutate-pods", h, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader(body)))
		resp := answer(t, rec)
		if len(resp.Patch) == 0 {
			return
		}
		var in admissionv1.AdmissionReview
		if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
			t.Fatalf("patch for a body that is not a review: %s", resp.Patch)
		}
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("patch does not decode: %v: %s", err, resp.Patch)
		}
		// The API server applies the patch to its own encoding of the
		// decoded pod, not to the bytes it sent. It decodes field names
		// case-sensitively (sigs.k8s.io/json), as the handler does:
		// encoding/json would also match "resourCes" to resources, and
		// fail on or read a pod the API server never had.
		var pod corev1.Pod
		if err := kjson.UnmarshalCaseSensitivePreserveInts(in.Request.Object.Raw, &pod); err != nil {
			t.Fatalf("patch for an object that is not a pod: %s", resp.Patch)
		}
		doc, err := json.Marshal(&pod)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Apply(doc); err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", resp.Patch, doc, err)
		}
	})
}
