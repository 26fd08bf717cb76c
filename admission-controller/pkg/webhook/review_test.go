package webhook

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestAppendReviewMatchesMarshal holds the hand-written answer to the
// bytes json.Marshal writes for the same AdmissionReview.
func TestAppendReviewMatchesMarshal(t *testing.T) {
	patch := []byte(`[{"op":"add","path":"/metadata/annotations","value":{"a":"b"}}]`)
	for _, tc := range []struct {
		name  string
		uid   types.UID
		patch []byte
	}{
		{name: "no patch", uid: "705ab4f5-6393-11e8-b7cc-42010a800002"},
		{name: "patch", uid: "705ab4f5-6393-11e8-b7cc-42010a800002", patch: patch},
		{name: "empty uid (Recover)", uid: ""},
		{name: "empty patch is no patch", uid: "u", patch: []byte{}},
		{name: "patch whose base64 needs padding", uid: "u", patch: []byte("[1]")},
		{name: "uid needing escapes", uid: "a\"b\\c<d>&\n\u2028é\xff", patch: patch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := &admissionv1.AdmissionResponse{UID: tc.uid, Allowed: true}
			if len(tc.patch) > 0 {
				pt := admissionv1.PatchTypeJSONPatch
				resp.Patch, resp.PatchType = tc.patch, &pt
			}
			want, err := json.Marshal(&admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
				Response: resp,
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendReview([]byte("x"), tc.uid, tc.patch)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "x"+string(want) {
				t.Fatalf("appendReview\n got %s\nwant x%s", got, want)
			}
		})
	}
}
