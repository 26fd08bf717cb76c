package target

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Reading /scale costs one API request per target and loop: at 10,000
// autoscalers and the default client rate limit (50 QPS) that alone takes
// 200 s, longer than a loop. The built-in kinds that almost every target
// is (apps/v1 Deployment, StatefulSet, ReplicaSet) keep what /scale reports
// in their own spec and status, so a watch answers them from memory. Any
// other kind, an object the cache does not hold (yet), and every write
// still go to /scale: the cache only ever saves requests, it never answers
// NotFound and never decides a write's resourceVersion.

// informedKind is one built-in workload kind served from a watch.
type informedKind struct {
	resource schema.GroupResource
	informer cache.SharedIndexInformer
}

// UseInformers makes GetScale and Selector answer apps/v1 Deployments,
// StatefulSets and ReplicaSets from f's watches once they have synced,
// instead of reading /scale. Call it before f is started. The cached
// objects are trimmed to what /scale reports (name, replicas, selector), so
// the watch costs a few hundred bytes per object; the caller's RBAC must
// allow list and watch of the three kinds.
func (r *Resolver) UseInformers(f informers.SharedInformerFactory) error {
	apps := f.Apps().V1()
	kinds := map[string]informedKind{
		"Deployment":  {schema.GroupResource{Group: "apps", Resource: "deployments"}, apps.Deployments().Informer()},
		"StatefulSet": {schema.GroupResource{Group: "apps", Resource: "statefulsets"}, apps.StatefulSets().Informer()},
		"ReplicaSet":  {schema.GroupResource{Group: "apps", Resource: "replicasets"}, apps.ReplicaSets().Informer()},
	}
	for kind, k := range kinds {
		if err := k.informer.SetTransform(trimWorkload); err != nil {
			return fmt.Errorf("%s cache transform: %w", kind, err)
		}
	}
	r.mu.Lock()
	r.informed = kinds
	r.mu.Unlock()
	return nil
}

// workloadOf reads what /scale reports from a cached workload.
func workloadOf(obj any) (m metav1.ObjectMeta, replicas *int32, sel *metav1.LabelSelector, statusReplicas int32, ok bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas, true
	case *appsv1.StatefulSet:
		return o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas, true
	case *appsv1.ReplicaSet:
		return o.ObjectMeta, o.Spec.Replicas, o.Spec.Selector, o.Status.Replicas, true
	}
	return metav1.ObjectMeta{}, nil, nil, 0, false
}

// parsedSelector is a cached object's selector, converted once: the
// updater asks for each target's scale and selector on every loop, and
// converting (validating every key and value) was most of that cost.
// obj is the cached object it was converted from; the informer replaces
// the object on every change, so another pointer means a new conversion.
type parsedSelector struct {
	obj any
	sel labels.Selector
	str string
}

// selectorOf returns the selector of a cached object, from r.parsed when
// it was converted from this very object. It reports false for an object
// /scale would answer differently (no or invalid selector), which then
// goes to /scale: /scale reports an empty selector, which callers refuse
// (ErrNoSelector) rather than act on every pod.
func (r *Resolver) selectorOf(key cacheKey, obj any, ls *metav1.LabelSelector) (parsedSelector, bool) {
	r.mu.Lock()
	p, ok := r.parsed[key]
	r.mu.Unlock()
	if ok && p.obj == obj {
		return p, p.sel != nil
	}
	p = parsedSelector{obj: obj}
	if ls != nil {
		if s, err := metav1.LabelSelectorAsSelector(ls); err == nil && !s.Empty() {
			p.sel, p.str = s, s.String()
		}
	}
	r.mu.Lock()
	if r.parsed == nil {
		r.parsed = map[cacheKey]parsedSelector{}
	}
	r.parsed[key] = p
	r.mu.Unlock()
	return p, p.sel != nil
}

// cachedScale answers ref from a synced watch, if it is an informed kind
// the cache holds; an invalid ref is left to /scale's validation. The
// Scale is the one the API server's /scale handler derives from the
// workload: spec.replicas (defaulted to 1, as the API server defaults
// it), status.replicas and the selector in its string form.
func (r *Resolver) cachedScale(namespace string, ref *autoscalingv1.CrossVersionObjectReference) (*autoscalingv1.Scale, schema.GroupResource, labels.Selector, bool) {
	if ref == nil || ref.Name == "" {
		return nil, schema.GroupResource{}, nil, false
	}
	r.mu.Lock()
	k, ok := r.informed[ref.Kind]
	r.mu.Unlock()
	if !ok {
		return nil, schema.GroupResource{}, nil, false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != "apps" {
		return nil, schema.GroupResource{}, nil, false
	}
	if !k.informer.HasSynced() {
		return nil, schema.GroupResource{}, nil, false
	}
	key := cacheKey{namespace: namespace, apiVersion: ref.APIVersion, kind: ref.Kind, name: ref.Name}
	obj, exists, err := k.informer.GetIndexer().GetByKey(namespace + "/" + ref.Name)
	if err != nil || !exists {
		r.mu.Lock()
		delete(r.parsed, key)
		r.mu.Unlock()
		return nil, schema.GroupResource{}, nil, false
	}
	m, replicas, ls, statusReplicas, ok := workloadOf(obj)
	if !ok {
		return nil, schema.GroupResource{}, nil, false
	}
	p, ok := r.selectorOf(key, obj, ls)
	if !ok {
		return nil, schema.GroupResource{}, nil, false
	}
	spec := int32(1)
	if replicas != nil {
		spec = *replicas
	}
	return &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion},
		Spec:       autoscalingv1.ScaleSpec{Replicas: spec},
		Status:     autoscalingv1.ScaleStatus{Replicas: statusReplicas, Selector: p.str},
	}, k.resource, p.sel, true
}

// trimWorkload keeps what scaleOf reads of an apps/v1 workload; the pod
// template, most of its size, is dropped.
func trimWorkload(obj any) (any, error) {
	meta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
	}
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: meta(o.ObjectMeta),
			Spec:   appsv1.DeploymentSpec{Replicas: o.Spec.Replicas, Selector: o.Spec.Selector},
			Status: appsv1.DeploymentStatus{Replicas: o.Status.Replicas}}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: meta(o.ObjectMeta),
			Spec:   appsv1.StatefulSetSpec{Replicas: o.Spec.Replicas, Selector: o.Spec.Selector},
			Status: appsv1.StatefulSetStatus{Replicas: o.Status.Replicas}}, nil
	case *appsv1.ReplicaSet:
		return &appsv1.ReplicaSet{ObjectMeta: meta(o.ObjectMeta),
			Spec:   appsv1.ReplicaSetSpec{Replicas: o.Spec.Replicas, Selector: o.Spec.Selector},
			Status: appsv1.ReplicaSetStatus{Replicas: o.Status.Replicas}}, nil
	}
	// Tombstones and anything else pass through unchanged.
	return obj, nil
}

// Reads returns how many GetScale and Selector calls were answered from a
// watch and how many read /scale (a Selector answered from its TTL cache
// counts as neither), so that components can export whether the watches
// pay off.
func (r *Resolver) Reads() (watch, scale int64) {
	return r.watchReads.Load(), r.scaleReads.Load()
}

// RegisterMetrics exports Reads on reg as
// aware_<component>_scale_target_reads_total{source="watch"|"api"}.
func (r *Resolver) RegisterMetrics(reg prometheus.Registerer, component string) error {
	for _, src := range []struct {
		label string
		read  func() int64
	}{
		{"watch", func() int64 { w, _ := r.Reads(); return w }},
		{"api", func() int64 { _, s := r.Reads(); return s }},
	} {
		c := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "aware_" + component + "_scale_target_reads_total",
			Help:        "Scale target reads (replicas and selector), by source: a watch of the built-in workload kinds, or the API's /scale subresource.",
			ConstLabels: prometheus.Labels{"source": src.label},
		}, func() float64 { return float64(src.read()) })
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register scale target read metrics: %w", err)
		}
	}
	return nil
}
