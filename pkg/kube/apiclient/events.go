package apiclient

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
)

// retryTransient is the event sink of NewRecorder. client-go's recorder
// retries an event (12 attempts, 10 s apart) only when the API server
// could not be reached; an event the server answers with an error status
// is dropped at once. An API server that is starting, overloaded or cut off
// from etcd answers 5xx or 429 for a while, and an outage warning recorded
// then (recommender/controller/outage.go) would be lost just as the API
// returns. Those answers reach the recorder as errors it retries; every
// other status (a forbidden event, an existing one, a missing one to
// patch) reaches it unchanged.
type retryTransient struct{ record.EventSink }

var _ record.EventSink = retryTransient{}

func (s retryTransient) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(e)
	return out, retriable(err)
}

func (s retryTransient) Update(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Update(e)
	return out, retriable(err)
}

func (s retryTransient) Patch(old *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(old, data)
	return out, retriable(err)
}

// retriable wraps a transient error status so that the recorder, which
// decides on the error's dynamic type, retries it; errors.As still finds
// the status inside.
func retriable(err error) error {
	if apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return fmt.Errorf("a transient answer from the API server, retried: %w", err)
	}
	return err
}
