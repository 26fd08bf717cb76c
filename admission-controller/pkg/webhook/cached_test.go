package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// cachedMatcher answers MatchCached with (mpa, ok) and Match with mpa,
// counting the calls of each.
type cachedMatcher struct {
	mpa          *v1alpha1.MultidimPodAutoscaler
	ok, boom     bool
	match, cache int
}

var _ CachedMatcher = (*cachedMatcher)(nil)

func (c *cachedMatcher) Match(context.Context, *corev1.Pod) (*v1alpha1.MultidimPodAutoscaler, error) {
	c.match++
	return c.mpa, nil
}

func (c *cachedMatcher) MatchCached(context.Context, *corev1.Pod) (*v1alpha1.MultidimPodAutoscaler, bool) {
	c.cache++
	if c.boom {
		panic("cached lookup bug")
	}
	return c.mpa, c.ok
}

// TestHandlerCachedMatch: a match answered from memory is used as is; one
// that cannot be goes to Match; either way the answer is the same.
func TestHandlerCachedMatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		m          *cachedMatcher
		wantPatch  bool
		wantMatch  int // calls of Match
		wantResult string
	}{
		{name: "answered from memory", m: &cachedMatcher{mpa: mpaWithRec("250m"), ok: true}, wantPatch: true, wantResult: ResultPatched},
		{name: "no MPA, from memory", m: &cachedMatcher{ok: true}, wantResult: ResultSkipped},
		{name: "memory cannot answer: Match does", m: &cachedMatcher{mpa: mpaWithRec("250m")}, wantPatch: true, wantMatch: 1, wantResult: ResultPatched},
		{name: "a panic in the lookup from memory: allowed unchanged", m: &cachedMatcher{mpa: mpaWithRec("250m"), ok: true, boom: true}, wantResult: ResultError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			metrics, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			h := &Handler{Matcher: tc.m, Metrics: metrics}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate-pods", bytes.NewReader(reviewBody(t, nil))))
			resp := answer(t, rec)
			if (len(resp.Patch) > 0) != tc.wantPatch {
				t.Errorf("patch %s, want one: %v", resp.Patch, tc.wantPatch)
			}
			if tc.m.cache != 1 || tc.m.match != tc.wantMatch {
				t.Errorf("MatchCached called %d times, Match %d; want 1 and %d", tc.m.cache, tc.m.match, tc.wantMatch)
			}
			if got := testutil.ToFloat64(metrics.requests.WithLabelValues(tc.wantResult)); got != 1 {
				t.Errorf("%s answers counted %v, want 1", tc.wantResult, got)
			}
		})
	}
}
