package apiclient

import (
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// retryTransient is the event sink of NewRecorder. client-go's recorder
// retries an event (12 attempts, 10 s apart) only when the API server
// could not be reached; an event the server answers with an error status
// is dropped at once. An API server that is starting, overloaded or cut off
// from etcd answers 5xx or 429 for a while, and an outage warning recorded
// then (recommender/controller/outage.go) would be lost just as the API
// returns. Those answers reach the recorder as errors it retries.
//
// So do 401 and 403 answers within refusalGrace of the server last being
// unreachable or answering 5xx or 429: a kube-apiserver that has just
// started serves requests before its RBAC informers have synced and
// refuses them meanwhile (kubernetes/kubernetes#101422), as its admission
// plugins do until theirs have ("not yet ready to handle request", 403). The recorder sends events one at a time,
// so every warning queued during an outage reaches the restarted server
// back to back at the first attempt after it listens again; when that
// attempt fell in this window, all of them were dropped together, and only
// the events recorded after it (APIReadRecovered) were written. A refusal
// with no outage before it (RBAC that does not grant events) is still
// dropped at once, as is a refusal in a namespace being deleted, and every
// other status (an existing event, a missing one to patch).
type retryTransient struct {
	record.EventSink
	now func() time.Time

	mu sync.Mutex
	// troubleAt is when the API server last could not be reached or
	// answered 5xx or 429, zero once an event was written after it.
	troubleAt time.Time
}

var _ record.EventSink = (*retryTransient)(nil)

// refusalGrace is how long after the API server was last unreachable a
// refusal is taken for one of a server still starting. A kube-apiserver
// syncs its RBAC informers within seconds of listening; a minute leaves
// room for a loaded machine and keeps a lasting refusal from holding the
// recorder's queue (it retries an event for about two minutes) for long.
const refusalGrace = time.Minute

func newRetryTransient(sink record.EventSink) *retryTransient {
	return &retryTransient{EventSink: sink, now: time.Now}
}

func (s *retryTransient) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(e)
	return out, s.retriable(err)
}

func (s *retryTransient) Update(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Update(e)
	return out, s.retriable(err)
}

func (s *retryTransient) Patch(old *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(old, data)
	return out, s.retriable(err)
}

// retriable wraps a transient error status so that the recorder, which
// decides on the error's dynamic type, retries it; errors.As still finds
// the status inside. It remembers when the server was last in trouble.
func (s *retryTransient) retriable(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var status apierrors.APIStatus
	var construction *rest.RequestConstructionError
	switch {
	case err == nil:
		s.troubleAt = time.Time{}
		return nil
	case apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err):
		s.troubleAt = now
		return fmt.Errorf("a transient answer from the API server, retried: %w", err)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		// A namespace being deleted refuses new events for good.
		if !s.troubleAt.IsZero() && now.Sub(s.troubleAt) < refusalGrace && !apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return fmt.Errorf("a refusal %s after the API server was last unreachable (one still starting), retried: %w",
				now.Sub(s.troubleAt).Round(time.Millisecond), err)
		}
		return err
	case errors.As(err, &status) || errors.As(err, &construction):
		return err
	default:
		// Not reached: the recorder retries it as it is.
		s.troubleAt = now
		return err
	}
}
