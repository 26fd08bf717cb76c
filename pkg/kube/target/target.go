// Package target resolves an MPA's scaleTargetRef to something every
// component can act on: the target's /scale subresource (replicas and the pod
// selector) through client-go's generic scale client, so Deployments,
// StatefulSets, ReplicaSets and any custom resource with /scale work alike.
//
// Errors are classified so callers can tell a configuration problem (the
// recommender sets ConfigUnsupported) from a target that is simply missing
// or a transient API failure:
//
//	errors.Is(err, target.ErrTargetNotFound)     // the object does not exist
//	errors.Is(err, target.ErrNoScaleSubresource) // the kind has no /scale
//	errors.Is(err, target.ErrUnknownKind)        // the kind is not served
//	errors.Is(err, target.ErrNoSelector)         // /scale reports no selector
//	errors.Is(err, target.ErrInvalidRef)         // malformed reference
//	target.IsUnsupported(err)                    // any of the last four
package target

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	"k8s.io/client-go/util/retry"
)

// Sentinel errors; every error returned by a Resolver that has one of these
// causes wraps it, so test with errors.Is.
var (
	// ErrTargetNotFound: the referenced object does not exist (yet).
	ErrTargetNotFound = errors.New("scale target not found")
	// ErrNoScaleSubresource: the kind exists but does not serve /scale, so
	// it cannot be scaled generically.
	ErrNoScaleSubresource = errors.New("kind has no /scale subresource")
	// ErrUnknownKind: the API server does not serve the referenced
	// group/version/kind (CRD not installed, typo in apiVersion or kind).
	ErrUnknownKind = errors.New("kind not served by the API server")
	// ErrNoSelector: /scale reports no status.selector, so the target's pods
	// cannot be found (a custom resource without labelSelectorPath).
	ErrNoSelector = errors.New("scale subresource reports no pod selector")
	// ErrInvalidRef: the reference itself is malformed.
	ErrInvalidRef = errors.New("invalid scaleTargetRef")
)

// IsUnsupported reports whether err means the MPA's target can never be
// handled as configured (as opposed to missing or transiently failing):
// the recommender maps this to the ConfigUnsupported condition.
func IsUnsupported(err error) bool {
	return errors.Is(err, ErrNoScaleSubresource) || errors.Is(err, ErrUnknownKind) ||
		errors.Is(err, ErrNoSelector) || errors.Is(err, ErrInvalidRef)
}

// DefaultSelectorTTL is how long a resolved selector is reused. Selectors
// change only when someone edits the workload's selector, which is rare and
// (for Deployments) immutable; a short TTL still picks such edits up.
const DefaultSelectorTTL = 30 * time.Second

// mapperResetInterval bounds how often an unknown kind triggers a discovery
// refresh: a CRD installed after start must become resolvable, but a typo in
// one MPA must not make every loop re-run full discovery.
const mapperResetInterval = 30 * time.Second

// Interface is what consumers use; declare a narrower one at the consumer if
// only part of it is needed.
type Interface interface {
	Selector(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, error)
	GetScale(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, error)
	UpdateReplicas(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference, replicas int32) error
}

var _ Interface = (*Resolver)(nil)

// Resolver resolves scale target references. It is safe for concurrent use.
type Resolver struct {
	mapper meta.RESTMapper
	scales scale.ScalesGetter
	// disco tells whether a resource has a /scale subresource, which is how
	// a 404 from /scale is split into "no object" and "no subresource".
	disco discovery.ServerResourcesInterface
	ttl   time.Duration
	now   func() time.Time

	mu        sync.Mutex
	selectors map[cacheKey]cachedSelector
	lastReset time.Time
	// informed are the kinds answered from watches (UseInformers);
	// parsed are their selectors, converted once per cached object.
	informed map[string]informedKind
	parsed   map[cacheKey]parsedSelector
	// watchReads and scaleReads count GetScale and Selector answers by
	// where they came from (Reads).
	watchReads, scaleReads atomic.Int64
}

type cacheKey struct {
	namespace, apiVersion, kind, name string
}

type cachedSelector struct {
	selector labels.Selector
	expires  time.Time
}

// Option configures a Resolver.
type Option func(*Resolver)

// WithSelectorTTL sets how long selectors are cached; zero disables the cache.
func WithSelectorTTL(ttl time.Duration) Option { return func(r *Resolver) { r.ttl = ttl } }

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option { return func(r *Resolver) { r.now = now } }

// New returns a Resolver over the given mapper, scale client and discovery
// client. If mapper implements meta.ResettableRESTMapper it is reset (at most
// every 30s) when a kind is not found, so newly installed CRDs resolve.
func New(mapper meta.RESTMapper, scales scale.ScalesGetter, disco discovery.ServerResourcesInterface, opts ...Option) *Resolver {
	r := &Resolver{
		mapper:    mapper,
		scales:    scales,
		disco:     disco,
		ttl:       DefaultSelectorTTL,
		now:       time.Now,
		selectors: map[cacheKey]cachedSelector{},
	}
	for _, o := range opts {
		o(r)
	}
	return r
}

// NewForConfig builds a Resolver with a memory-cached discovery client, a
// deferred discovery RESTMapper and client-go's scale client.
func NewForConfig(cfg *rest.Config, opts ...Option) (*Resolver, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building discovery client: %w", err)
	}
	cached := memory.NewMemCacheClient(dc)
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(cached)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(cached))
	if err != nil {
		return nil, fmt.Errorf("building scale client: %w", err)
	}
	return New(mapper, scales, cached, opts...), nil
}

// GetScale returns the target's scale subresource and the group/resource it
// was resolved to.
func (r *Resolver) GetScale(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, error) {
	if s, gr, _, ok := r.cachedScale(namespace, ref); ok {
		r.watchReads.Add(1)
		return s, gr, nil
	}
	r.scaleReads.Add(1)
	s, gvr, err := r.getScale(ctx, namespace, ref)
	return s, gvr.GroupResource(), err
}

func (r *Resolver) getScale(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupVersionResource, error) {
	mapping, err := r.mapping(ref)
	if err != nil {
		return nil, schema.GroupVersionResource{}, err
	}
	gvr := mapping.Resource
	s, err := r.scales.Scales(namespace).Get(ctx, gvr.GroupResource(), ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, gvr, r.classify(err, namespace, ref, gvr)
	}
	return s, gvr, nil
}

// Selector returns the label selector of the target's pods, from
// /scale status.selector, cached for the selector TTL; a kind answered
// from a watch (UseInformers) needs no TTL: the watch keeps it current.
func (r *Resolver) Selector(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	if sel, ok := r.memorySelector(namespace, ref); ok {
		return sel, nil
	}
	s, _, err := r.GetScale(ctx, namespace, ref)
	if err != nil {
		return nil, err
	}
	if s.Status.Selector == "" {
		// labels.Parse("") is Everything(); acting on every pod in the
		// namespace would be a disaster, so this is an error.
		return nil, fmt.Errorf("%s: %w", describe(namespace, ref), ErrNoSelector)
	}
	sel, err := labels.Parse(s.Status.Selector)
	if err != nil {
		return nil, fmt.Errorf("%s: parsing selector %q: %w", describe(namespace, ref), s.Status.Selector, err)
	}
	key := cacheKey{namespace: namespace, apiVersion: ref.APIVersion, kind: ref.Kind, name: ref.Name}
	if r.ttl > 0 {
		r.mu.Lock()
		r.selectors[key] = cachedSelector{selector: sel, expires: r.now().Add(r.ttl)}
		r.mu.Unlock()
	}
	return sel, nil
}

// CachedSelector is Selector answered from memory alone, without a
// request and so without waiting: ok is false when Selector would have to
// read the scale subresource (or would return an error), and the caller
// then asks Selector. When ok, the answer is the one Selector gives.
func (r *Resolver) CachedSelector(namespace string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, bool) {
	if validateRef(ref) != nil {
		return nil, false
	}
	return r.memorySelector(namespace, ref)
}

// memorySelector answers from the watch or the TTL cache, or not at all.
func (r *Resolver) memorySelector(namespace string, ref *autoscalingv1.CrossVersionObjectReference) (labels.Selector, bool) {
	if _, _, sel, ok := r.cachedScale(namespace, ref); ok {
		r.watchReads.Add(1)
		// cachedScale only answers valid, non-empty selectors.
		return sel, true
	}
	if r.ttl > 0 {
		key := cacheKey{namespace: namespace, apiVersion: ref.APIVersion, kind: ref.Kind, name: ref.Name}
		r.mu.Lock()
		c, ok := r.selectors[key]
		r.mu.Unlock()
		if ok && r.now().Before(c.expires) {
			return c.selector, true
		}
	}
	return nil, false
}

// UpdateReplicas sets spec.replicas of the target through /scale, retrying
// on write conflicts. Setting the current value is a no-op without a write.
func (r *Resolver) UpdateReplicas(ctx context.Context, namespace string, ref *autoscalingv1.CrossVersionObjectReference, replicas int32) error {
	if replicas < 0 {
		return fmt.Errorf("%s: negative replicas %d", describe(namespace, ref), replicas)
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, gvr, err := r.getScale(ctx, namespace, ref)
		if err != nil {
			return err
		}
		if s.Spec.Replicas == replicas {
			return nil
		}
		s = s.DeepCopy()
		s.Spec.Replicas = replicas
		if _, err := r.scales.Scales(namespace).Update(ctx, gvr.GroupResource(), s, metav1.UpdateOptions{}); err != nil {
			if apierrors.IsConflict(err) {
				return err // unwrapped so RetryOnConflict sees it
			}
			return fmt.Errorf("%s: updating scale to %d: %w", describe(namespace, ref), replicas, r.classify(err, namespace, ref, gvr))
		}
		return nil
	})
}

// InvalidateSelector drops a cached selector, e.g. after the target changed.
func (r *Resolver) InvalidateSelector(namespace string, ref *autoscalingv1.CrossVersionObjectReference) {
	if ref == nil {
		return
	}
	r.mu.Lock()
	delete(r.selectors, cacheKey{namespace: namespace, apiVersion: ref.APIVersion, kind: ref.Kind, name: ref.Name})
	r.mu.Unlock()
}

func validateRef(ref *autoscalingv1.CrossVersionObjectReference) error {
	switch {
	case ref == nil:
		return fmt.Errorf("%w: nil", ErrInvalidRef)
	case ref.Kind == "" || ref.Name == "":
		return fmt.Errorf("%w: kind and name are required (kind=%q name=%q)", ErrInvalidRef, ref.Kind, ref.Name)
	}
	return nil
}

func (r *Resolver) mapping(ref *autoscalingv1.CrossVersionObjectReference) (*meta.RESTMapping, error) {
	if err := validateRef(ref); err != nil {
		return nil, err
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("%w: apiVersion %q: %v", ErrInvalidRef, ref.APIVersion, err)
	}
	gk := gv.WithKind(ref.Kind).GroupKind()
	m, err := r.mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) && r.maybeResetMapper() {
		m, err = r.mapper.RESTMapping(gk, gv.Version)
	}
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("%s %s: %w: %v", ref.APIVersion, ref.Kind, ErrUnknownKind, err)
	}
	if err != nil {
		return nil, fmt.Errorf("mapping %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	return m, nil
}

// maybeResetMapper resets a resettable mapper unless that was done recently,
// and reports whether it did.
func (r *Resolver) maybeResetMapper() bool {
	rm, ok := r.mapper.(meta.ResettableRESTMapper)
	if !ok {
		return false
	}
	r.mu.Lock()
	now := r.now()
	if !r.lastReset.IsZero() && now.Sub(r.lastReset) < mapperResetInterval {
		r.mu.Unlock()
		return false
	}
	r.lastReset = now
	r.mu.Unlock()
	rm.Reset()
	return true
}

// classify turns an API error from /scale into one of the sentinels where
// possible. A 404 from /scale is ambiguous: it is returned both for a missing
// object and for a kind that has no scale subresource; discovery decides.
func (r *Resolver) classify(err error, namespace string, ref *autoscalingv1.CrossVersionObjectReference, gvr schema.GroupVersionResource) error {
	what := describe(namespace, ref)
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	has, derr := r.hasScale(gvr)
	switch {
	case derr != nil:
		// Cannot tell; "not found" is the conservative reading because it
		// is retried rather than reported as a configuration error.
		return fmt.Errorf("%s: %w (discovery failed: %v): %v", what, ErrTargetNotFound, derr, err)
	case !has:
		return fmt.Errorf("%s (%s): %w", what, gvr.GroupResource(), ErrNoScaleSubresource)
	default:
		return fmt.Errorf("%s: %w: %v", what, ErrTargetNotFound, err)
	}
}

func (r *Resolver) hasScale(gvr schema.GroupVersionResource) (bool, error) {
	if r.disco == nil {
		return true, nil
	}
	list, err := r.disco.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return false, err
	}
	for _, res := range list.APIResources {
		base, sub, ok := strings.Cut(res.Name, "/")
		if ok && base == gvr.Resource && sub == "scale" {
			return true, nil
		}
	}
	return false, nil
}

func describe(namespace string, ref *autoscalingv1.CrossVersionObjectReference) string {
	if ref == nil {
		return "scale target <nil>"
	}
	return fmt.Sprintf("scale target %s %s/%s (%s)", ref.Kind, namespace, ref.Name, ref.APIVersion)
}
