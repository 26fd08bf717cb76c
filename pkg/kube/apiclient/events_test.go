package apiclient

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// failingSink answers every call with err.
type failingSink struct{ err error }

func (f failingSink) Create(*corev1.Event) (*corev1.Event, error)        { return nil, f.err }
func (f failingSink) Update(*corev1.Event) (*corev1.Event, error)        { return nil, f.err }
func (f failingSink) Patch(*corev1.Event, []byte) (*corev1.Event, error) { return nil, f.err }

// TestRetryTransient: the recorder retries an event only when the error is
// not a *StatusError (client-go tools/record, recordEvent), so transient
// statuses must reach it as another type, and every other error as it
// was.
func TestRetryTransient(t *testing.T) {
	gr := schema.GroupResource{Resource: "events"}
	for _, tc := range []struct {
		name    string
		err     error
		retried bool
	}{
		{"internal error", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), true},
		{"service unavailable", apierrors.NewServiceUnavailable("starting"), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 1), true},
		{"gateway timeout", apierrors.NewTimeoutError("etcd", 1), true},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true},
		{"forbidden", apierrors.NewForbidden(gr, "e", errors.New("RBAC")), false},
		{"already exists", apierrors.NewAlreadyExists(gr, "e"), false},
		{"not found, for a patch", apierrors.NewNotFound(gr, "e"), false},
		{"transport", errors.New("connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := retryTransient{failingSink{tc.err}}
			_, create := s.Create(&corev1.Event{})
			_, update := s.Update(&corev1.Event{})
			_, patch := s.Patch(&corev1.Event{}, nil)
			for call, err := range map[string]error{"create": create, "update": update, "patch": patch} {
				_, isStatus := err.(*apierrors.StatusError)
				wasStatus := errors.As(tc.err, new(*apierrors.StatusError))
				switch {
				case tc.retried && isStatus:
					t.Errorf("%s: %T reaches the recorder, which drops it", call, err)
				case tc.retried && !errors.Is(err, tc.err):
					t.Errorf("%s: %v does not wrap %v", call, err, tc.err)
				case !tc.retried && err != tc.err:
					t.Errorf("%s: %v, want %v unchanged", call, err, tc.err)
				case !tc.retried && isStatus != wasStatus:
					t.Errorf("%s: the error's type changed", call)
				}
			}
		})
	}
}

func TestRetryTransientPassesSuccess(t *testing.T) {
	s := retryTransient{failingSink{nil}}
	if _, err := s.Create(&corev1.Event{}); err != nil {
		t.Fatal(err)
	}
}
