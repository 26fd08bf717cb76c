// Package webhook serves the admission controller's AdmissionReview
// endpoint: it decodes the review defensively, finds the pod's MPA, asks
// package patch for the JSON patch and answers.
//
// The handler fails open. Whatever arrives — a wrong kind, a review without
// a request, unknown fields, garbage, a body over the size limit, a lookup
// that fails or does not finish within the timeout, a panic — it answers
// "allowed, no patch" with HTTP 200, so a fault here never blocks pod
// creation, even if the webhook was registered with failurePolicy Fail.
// Each answer is counted by result in aware_admission_requests_total.
package webhook

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kjson "sigs.k8s.io/json"

	"github.com/aware-k8s/aware/admission-controller/pkg/match"
	"github.com/aware-k8s/aware/admission-controller/pkg/patch"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// Results counted in aware_admission_requests_total.
const (
	// ResultPatched: the pod was patched.
	ResultPatched = "patched"
	// ResultUnchanged: an MPA governs the pod but nothing needed changing
	// (already at the recommendation, mode Off, no recommendation yet).
	ResultUnchanged = "unchanged"
	// ResultSkipped: not a pod CREATE, or no MPA governs the pod.
	ResultSkipped = "skipped"
	// ResultInvalid: the body was not a usable AdmissionReview v1.
	ResultInvalid = "invalid"
	// ResultError: a lookup failed, or the handler panicked.
	ResultError = "error"
	// ResultTimeout: the decision did not finish within the timeout.
	ResultTimeout = "timeout"
)

// Results lists every result label value.
var Results = []string{ResultPatched, ResultUnchanged, ResultSkipped, ResultInvalid, ResultError, ResultTimeout}

// Matcher finds the MPA governing a pod; nil means none.
type Matcher interface {
	Match(ctx context.Context, pod *corev1.Pod) (*v1alpha1.MultidimPodAutoscaler, error)
}

var _ Matcher = (*match.Matcher)(nil)

// CachedMatcher is a Matcher that can also answer from memory alone,
// without waiting (match.Matcher with informer-backed lookups): ok is
// false when it would have to ask the API server.
type CachedMatcher interface {
	Matcher
	MatchCached(ctx context.Context, pod *corev1.Pod) (mpa *v1alpha1.MultidimPodAutoscaler, ok bool)
}

var _ CachedMatcher = (*match.Matcher)(nil)

// LimitRanges lists the LimitRanges of a namespace. It reads a cache (the
// production one is an informer's lister) and never waits: it is also
// called outside the timeout's guard, on the path answered from memory.
type LimitRanges interface {
	LimitRanges(namespace string) ([]*corev1.LimitRange, error)
}

// LimitRangesFunc adapts a function to LimitRanges.
type LimitRangesFunc func(namespace string) ([]*corev1.LimitRange, error)

// LimitRanges implements LimitRanges.
func (f LimitRangesFunc) LimitRanges(namespace string) ([]*corev1.LimitRange, error) {
	return f(namespace)
}

var _ LimitRanges = LimitRangesFunc(nil)

// Defaults for Handler.
const (
	// DefaultMaxBodyBytes is above any valid review: etcd refuses objects
	// over 1.5 MiB, and a CREATE review carries the object once.
	DefaultMaxBodyBytes = 3 << 20
	// DefaultTimeout is below the registered webhook timeout (3s), so we
	// answer before the API server gives up on us.
	DefaultTimeout = 2 * time.Second
)

// Handler answers AdmissionReview v1 requests for pod CREATE.
type Handler struct {
	Matcher      Matcher
	LimitRanges  LimitRanges
	Metrics      *Metrics
	MaxBodyBytes int64
	Timeout      time.Duration
}

var _ http.Handler = (*Handler)(nil)

// outcome is the answer to one review.
type outcome struct {
	result  string
	patch   []byte
	updates string
	err     error
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	logger := klog.FromContext(r.Context())
	if r.Method != http.MethodPost {
		h.Metrics.observe(ResultInvalid, start)
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	limit := h.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	buf := getBuffer()
	defer putBuffer(buf)
	body, err := readAll(*buf, http.MaxBytesReader(w, r.Body, limit))
	*buf = body
	var uid types.UID
	var out outcome
	var req *admissionv1.AdmissionRequest
	// tag adds the request's uid and pod to logger. Most answers log
	// nothing at the default verbosity, so it is done only when something
	// is logged: the values cost allocations on every request.
	tagged := false
	tag := func() {
		if req != nil && !tagged {
			logger = klog.LoggerWithValues(logger, "uid", req.UID, "pod", klog.KRef(req.Namespace, req.Name))
			tagged = true
		}
	}
	if err != nil {
		out = outcome{result: ResultInvalid, err: fmt.Errorf("read body: %w", err)}
	} else {
		req, out = decode(body)
		if req != nil {
			uid = req.UID
			ctx := r.Context()
			if logger.V(2).Enabled() {
				// The lookups log at V(2) through the context's logger.
				tag()
				ctx = klog.NewContext(ctx, logger)
			}
			out = h.decide(ctx, req)
		}
	}
	switch {
	case out.err != nil && out.result == ResultInvalid:
		logger.V(2).Info("Answering allowed to an unusable admission request", "result", out.result, "err", out.err)
	case out.err != nil:
		tag()
		logger.Error(out.err, "Admitting the pod unchanged", "result", out.result)
	case out.result == ResultPatched:
		logger.V(2).Info("Patched pod resources", "updates", out.updates)
	}
	if err := writeReview(w, logger, uid, out.patch); err != nil {
		tag()
		logger.Error(err, "Encoding AdmissionReview")
	}
	h.Metrics.observe(out.result, start)
}

// decode returns the request of a well-formed AdmissionReview v1, or nil
// and the reason it is unusable. Unknown or duplicate fields make a review
// unusable: the API server never sends them, so they mean the sender is
// not the API server we were written for.
func decode(body []byte) (*admissionv1.AdmissionRequest, outcome) {
	var review admissionv1.AdmissionReview
	strictErrs, err := kjson.UnmarshalStrict(body, &review)
	switch {
	case err != nil:
		return nil, outcome{result: ResultInvalid, err: fmt.Errorf("decode AdmissionReview: %w", err)}
	case len(strictErrs) > 0:
		return nil, outcome{result: ResultInvalid, err: fmt.Errorf("decode AdmissionReview: %w", errors.Join(strictErrs...))}
	case review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview":
		return nil, outcome{result: ResultInvalid, err: fmt.Errorf("got %s %s, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)}
	case review.Request == nil:
		return nil, outcome{result: ResultInvalid, err: errors.New("AdmissionReview has no request")}
	}
	return review.Request, outcome{}
}

var podKind = metav1.GroupVersionKind{Group: "", Version: "v1", Kind: "Pod"}

// decide computes the answer within the timeout. The lookups run in their
// own goroutine so that one which ignores its context still cannot hold the
// answer back; it ends when its lookups do. Decoding the pod needs no such
// guard (it is bounded by MaxBodyBytes and never waits), so it runs here,
// on the connection's goroutine, whose stack has already grown to what the
// recursive JSON decoder needs; a fresh goroutine would grow and copy its
// stack several times per request. Nor does a match answered from memory
// (CachedMatcher), the usual case: it runs here too, and only a match that
// would ask the API server goes to the guarded goroutine. Handing a request
// to another goroutine wakes a thread, which at a steady rate below
// saturation costs more CPU than the lookups (docs/results/performance.md).
func (h *Handler) decide(ctx context.Context, req *admissionv1.AdmissionRequest) outcome {
	if req.Kind != podKind || req.Resource.Resource != "pods" || req.SubResource != "" || req.Operation != admissionv1.Create {
		return outcome{result: ResultSkipped}
	}
	pod := podPool.Get().(*corev1.Pod)
	// Lenient about the pod itself: an API server newer than our
	// k8s.io/api may send fields we do not know, and the patch only
	// addresses resources by container index, which such fields don't move.
	// The whole pod is decoded, not only the fields the patch reads: a pod
	// that does not decode is answered "invalid" and left alone, and
	// skipping fields would patch pods the API server itself cannot read.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Object.Raw, pod); err != nil {
		putPod(pod)
		return outcome{result: ResultInvalid, err: fmt.Errorf("decode pod: %w", err)}
	}
	if pod.Namespace == "" {
		// On CREATE the namespace may only be in the request.
		pod.Namespace = req.Namespace
	}
	if cm, ok := h.Matcher.(CachedMatcher); ok {
		if out, ok := h.admitCached(ctx, cm, pod); ok {
			putPod(pod)
			return out
		}
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	done := make(chan outcome, 1)
	go func() {
		// The pod is this goroutine's: it may outlive the answer.
		defer putPod(pod)
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{result: ResultError, err: fmt.Errorf("panic: %v", p)}
			}
		}()
		done <- h.admitPod(ctx, pod)
	}()
	select {
	case out := <-done:
		return out
	case <-ctx.Done():
		return outcome{result: ResultTimeout, err: fmt.Errorf("no decision within %s: %w", timeout, ctx.Err())}
	}
}

// admitCached answers from memory alone, on the caller's goroutine; ok is
// false when the match would have to ask the API server. A panic is
// answered as admitPod's goroutine answers it.
func (h *Handler) admitCached(ctx context.Context, cm CachedMatcher, pod *corev1.Pod) (out outcome, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			out, ok = outcome{result: ResultError, err: fmt.Errorf("panic: %v", p)}, true
		}
	}()
	m, ok := cm.MatchCached(ctx, pod)
	if !ok {
		return outcome{}, false
	}
	return h.admitMatched(pod, m), true
}

func (h *Handler) admitPod(ctx context.Context, pod *corev1.Pod) outcome {
	m, err := h.Matcher.Match(ctx, pod)
	if err != nil {
		return outcome{result: ResultError, err: fmt.Errorf("find MPA: %w", err)}
	}
	return h.admitMatched(pod, m)
}

// admitMatched answers for the pod's MPA m (nil: none governs it).
func (h *Handler) admitMatched(pod *corev1.Pod, m *v1alpha1.MultidimPodAutoscaler) outcome {
	if m == nil {
		return outcome{result: ResultSkipped}
	}
	var err error
	var lrs []*corev1.LimitRange
	if h.LimitRanges != nil {
		if lrs, err = h.LimitRanges.LimitRanges(pod.Namespace); err != nil {
			return outcome{result: ResultError, err: fmt.Errorf("list LimitRanges: %w", err)}
		}
	}
	in, ok := patch.InputFor(m, patch.CapsFrom(lrs))
	if !ok {
		return outcome{result: ResultUnchanged}
	}
	res := patch.Compute(pod, in)
	if len(res.Patch) == 0 {
		return outcome{result: ResultUnchanged}
	}
	b, err := patch.AppendJSON(make([]byte, 0, 512), res.Patch)
	if err != nil {
		return outcome{result: ResultError, err: fmt.Errorf("encode patch: %w", err)}
	}
	return outcome{result: ResultPatched, patch: b, updates: res.Updates[0] + summary(res.Updates)}
}

func summary(u []string) string {
	if len(u) <= 1 {
		return ""
	}
	return fmt.Sprintf(" (+%d more containers)", len(u)-1)
}

// writeReview answers allowed, with the patch if there is one. It returns
// the error if the answer could not be encoded (it then answers HTTP 500);
// a failed write is only logged at V(2): the client has gone.
func writeReview(w http.ResponseWriter, logger klog.Logger, uid types.UID, jsonPatch []byte) error {
	buf := getBuffer()
	defer putBuffer(buf)
	b, err := appendReview(*buf, uid, jsonPatch)
	*buf = b
	if err != nil {
		// Cannot happen for these types; answer nothing rather than garbage.
		http.Error(w, "internal error", http.StatusInternalServerError)
		return err
	}
	// Assigned rather than Set: the canonical key and a shared value save
	// two allocations per answer, and net/http only reads it.
	w.Header()["Content-Type"] = jsonContentType
	if _, err := w.Write(b); err != nil {
		logger.V(2).Info("Writing AdmissionReview", "err", err)
	}
	return nil
}

var jsonContentType = []string{"application/json"}

// reviewPrefix and the rest spell what json.Marshal writes for an
// AdmissionReview v1 with only a response: TypeMeta's fields first (kind,
// then apiVersion), then the response's uid and allowed, patch (base64)
// and patchType, each omitted when empty.
const (
	reviewPrefix  = `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"`
	reviewAllowed = `","allowed":true`
	reviewPatch   = `,"patch":"`
	reviewSuffix  = `","patchType":"JSONPatch"}}`
)

// appendReview appends the answer "allowed", with jsonPatch if not empty,
// encoded exactly as json.Marshal encodes the AdmissionReview (a test holds
// the two equal), without reflection. A uid that JSON must escape, which
// the API server never sends (it sends UUIDs), goes through json.Marshal.
func appendReview(dst []byte, uid types.UID, jsonPatch []byte) ([]byte, error) {
	if !plainJSONString(string(uid)) {
		resp := &admissionv1.AdmissionResponse{UID: uid, Allowed: true}
		if len(jsonPatch) > 0 {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = jsonPatch, &pt
		}
		b, err := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: resp,
		})
		return append(dst, b...), err
	}
	dst = append(dst, reviewPrefix...)
	dst = append(dst, uid...)
	dst = append(dst, reviewAllowed...)
	if len(jsonPatch) == 0 {
		return append(dst, "}}"...), nil
	}
	dst = append(dst, reviewPatch...)
	dst = base64.StdEncoding.AppendEncode(dst, jsonPatch)
	return append(dst, reviewSuffix...), nil
}

// plainJSONString reports whether json.Marshal writes s verbatim between
// quotes: printable ASCII other than '"', '\' and the HTML characters it
// escapes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// podPool holds decoded pods, the largest object of a review. A pod is
// zeroed when it is put back (the decoder merges into what it finds), and
// nothing admitPod returns points into it.
var podPool = sync.Pool{New: func() any { return new(corev1.Pod) }}

func putPod(p *corev1.Pod) {
	*p = corev1.Pod{}
	podPool.Put(p)
}

// Buffers for request bodies and answers. A body is done with once it is
// decoded (the decoder copies every string and the raw object out of it),
// an answer once it is written, so both go back to the pool when
// ServeHTTP returns. Large buffers are dropped rather than kept.
var bufferPool = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

const maxPooledBuffer = 64 << 10

func getBuffer() *[]byte { return bufferPool.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) > maxPooledBuffer {
		return
	}
	*b = (*b)[:0]
	bufferPool.Put(b)
}

// readAll is io.ReadAll into dst's spare capacity.
func readAll(dst []byte, r io.Reader) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return dst, err
		}
	}
}

// Recover answers "allowed, no patch" when next panics, so a bug costs a
// pod its sizing, never its creation, and the server keeps running.
func Recover(next http.Handler, m *Metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		defer func() {
			p := recover()
			if p == nil || p == http.ErrAbortHandler {
				if p != nil {
					panic(p)
				}
				return
			}
			logger := klog.FromContext(r.Context())
			logger.Error(fmt.Errorf("panic: %v", p), "Admission handler panicked; admitting unchanged")
			m.observe(ResultError, start)
			if err := writeReview(w, logger, "", nil); err != nil {
				logger.Error(err, "Encoding AdmissionReview")
			}
		}()
		next.ServeHTTP(w, r)
	})
}
