package apiclient

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		{"unauthorized", apierrors.NewUnauthorized("invalid bearer token"), false},
		{"transport", errors.New("connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newRetryTransient(failingSink{tc.err})
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
	s := newRetryTransient(failingSink{nil})
	if _, err := s.Create(&corev1.Event{}); err != nil {
		t.Fatal(err)
	}
}

// scriptedSink answers the calls with errs in turn.
type scriptedSink struct{ errs []error }

func (f *scriptedSink) next() error {
	err := f.errs[0]
	f.errs = f.errs[1:]
	return err
}
func (f *scriptedSink) Create(*corev1.Event) (*corev1.Event, error)        { return nil, f.next() }
func (f *scriptedSink) Update(*corev1.Event) (*corev1.Event, error)        { return nil, f.next() }
func (f *scriptedSink) Patch(*corev1.Event, []byte) (*corev1.Event, error) { return nil, f.next() }

// TestRetryRefusalAfterOutage: a restarted kube-apiserver refuses requests
// (401, 403) until its RBAC informers have synced, and the recorder sends
// the warnings queued during the outage back to back at that moment. A
// refusal shortly after the server was unreachable, or answered 5xx, is
// retried; one long after, or after an event was written, or with no
// outage before it, is dropped as before.
func TestRetryRefusalAfterOutage(t *testing.T) {
	gr := schema.GroupResource{Resource: "events"}
	forbidden := apierrors.NewForbidden(gr, "e", errors.New("RBAC: informers not synced"))
	unauthorized := apierrors.NewUnauthorized("token lookup")
	refused := errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
	terminating := apierrors.NewForbidden(gr, "e", errors.New("namespace ns is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	type step struct {
		after   time.Duration // since the previous call
		err     error
		retried bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"refused with no outage before", []step{{0, forbidden, false}}},
		{"403 just after the server was unreachable", []step{{0, refused, false}, {10 * time.Second, forbidden, true}, {10 * time.Second, forbidden, true}}},
		{"401 just after the server was unreachable", []step{{0, refused, false}, {3 * time.Second, unauthorized, true}}},
		{"403 just after a 503", []step{{0, apierrors.NewServiceUnavailable("starting"), true}, {time.Second, forbidden, true}}},
		{"a lasting refusal stops being retried", []step{{0, refused, false}, {30 * time.Second, forbidden, true}, {40 * time.Second, forbidden, false}}},
		{"a written event ends the outage", []step{{0, refused, false}, {time.Second, nil, false}, {time.Second, forbidden, false}}},
		{"other statuses are not retried after an outage", []step{{0, refused, false}, {time.Second, apierrors.NewAlreadyExists(gr, "e"), false}}},
		{"a terminating namespace is not retried after an outage", []step{{0, refused, false}, {time.Second, terminating, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &scriptedSink{}
			for _, st := range tc.steps {
				sink.errs = append(sink.errs, st.err)
			}
			s := newRetryTransient(sink)
			now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
			s.now = func() time.Time { return now }
			for i, st := range tc.steps {
				now = now.Add(st.after)
				_, err := s.Create(&corev1.Event{})
				_, isStatus := err.(*apierrors.StatusError)
				switch {
				case st.err == nil && err != nil:
					t.Errorf("step %d: %v, want success", i, err)
				case st.retried && (isStatus || !errors.Is(err, st.err)):
					t.Errorf("step %d: %T %v reaches the recorder as a drop, want %v wrapped", i, err, err, st.err)
				case !st.retried && err != st.err:
					t.Errorf("step %d: %v, want %v unchanged", i, err, st.err)
				}
			}
		})
	}
}
