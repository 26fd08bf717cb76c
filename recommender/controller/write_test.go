package controller

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

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
