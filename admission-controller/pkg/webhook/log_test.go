package webhook

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// loggingMatcher logs at V(2) through the context's logger, as
// match.Matcher does when several MPAs target one controller.
type loggingMatcher struct {
	mpa *v1alpha1.MultidimPodAutoscaler
	err error
}

func (m loggingMatcher) Match(ctx context.Context, _ *corev1.Pod) (*v1alpha1.MultidimPodAutoscaler, error) {
	klog.FromContext(ctx).V(2).Info("lookup")
	return m.mpa, m.err
}

// TestHandlerLogsTheRequest: the request's uid and pod are added to the
// logger only when something is logged, and whatever is logged carries
// them, at the default verbosity and at V(2).
func TestHandlerLogsTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name      string
		verbosity int
		matcher   loggingMatcher
		want      []string // lines, each holding the uid and pod
	}{
		{name: "patched at the default verbosity: nothing", matcher: loggingMatcher{mpa: mpaWithRec("250m")}},
		{name: "a failed lookup at the default verbosity: the error names the request", matcher: loggingMatcher{err: errors.New("API down")},
			want: []string{`"Admitting the pod unchanged" err="find MPA: API down"`}},
		{name: "patched at V(2): the lookup's log and the answer's name the request", verbosity: 2, matcher: loggingMatcher{mpa: mpaWithRec("250m")},
			want: []string{`"lookup"`, `"Patched pod resources"`}},
		{name: "a failed lookup at V(2): both lines name the request", verbosity: 2, matcher: loggingMatcher{err: errors.New("API down")},
			want: []string{`"lookup"`, `"Admitting the pod unchanged"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(tc.verbosity), textlogger.Output(&out)))
			h := &Handler{Matcher: tc.matcher}
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader(reviewBody(t, nil)))
			h.ServeHTTP(rec, r.WithContext(klog.NewContext(r.Context(), logger)))
			answer(t, rec)
			var lines []string
			if out.Len() > 0 {
				lines = strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			}
			if len(lines) != len(tc.want) {
				t.Fatalf("logged %q, want %d lines", lines, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) || !strings.Contains(lines[i], `uid="uid-1"`) || !strings.Contains(lines[i], `pod="ns/"`) {
					t.Errorf("line %q, want %s with the uid and pod", lines[i], w)
				}
			}
		})
	}
}
