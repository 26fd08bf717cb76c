// Package patch computes the JSON patch (RFC 6902) the admission controller
// returns for a new pod: container requests and limits taken from the
// matching MultidimPodAutoscaler's recommendation, bounded by its resource
// policy and by the namespace's LimitRanges, and an annotation recording
// what changed.
//
// The package is pure: it reads API types but imports no client, so every
// rule is table-tested without a cluster.
//
// The order of bounds follows what the API server will enforce after us:
// the MPA's minAllowed/maxAllowed first (the user's intent), then
// LimitRange min/max and maxLimitRequestRatio, because a pod that violates a
// LimitRange is rejected by the LimitRanger validation that runs after
// mutating webhooks, and failing a pod's creation is worse than sizing it
// less precisely.
package patch

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/vpa"
	"github.com/aware-k8s/aware/pkg/core/workload"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
)

// UpdatesAnnotation is the pod annotation listing what the admission
// controller changed, e.g. "container app: cpu request, memory request".
const UpdatesAnnotation = "autoscaling.aware.dev/updates"

// Operation is one RFC 6902 operation. Only add and replace are produced.
type Operation struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// Input is everything the patch depends on.
type Input struct {
	// Mode is the MPA's update mode; Off produces no patch.
	Mode v1alpha1.UpdateMode
	// Constraints bound the requests per container.
	Constraints workload.Constraints
	// Recommendation holds the per-container targets.
	Recommendation workload.Recommendation
	// Caps are the namespace's LimitRange bounds.
	Caps Caps
}

// InputFor reads an MPA into an Input; ok is false when the MPA has no
// recommendation yet.
func InputFor(m *v1alpha1.MultidimPodAutoscaler, caps Caps) (in Input, ok bool) {
	rec, ok := mpa.Recommendation(&m.Status)
	mode, cons := mpa.UpdateMode(m), mpa.Constraints(m)
	if !ok {
		// A start-up boost needs no recommendation: it multiplies the
		// pod's own request.
		if !BoostsAtCreation(mode) || !mpa.HasStartupBoost(&cons) {
			return Input{}, false
		}
		rec = workload.Recommendation{}
	}
	return Input{Mode: mode, Constraints: cons, Recommendation: rec, Caps: caps}, true
}

// Result is the outcome for one pod. An empty Patch means "leave the pod
// alone".
type Result struct {
	Patch []Operation
	// Updates lists the changes per container, in pod order, e.g.
	// "container app: cpu request, cpu limit". It is also the value of the
	// UpdatesAnnotation.
	Updates []string
}

// AppliesAtCreation reports whether pods are sized at creation in mode m.
// Unknown modes do nothing: an API newer than this binary must not make it
// act on a mode it does not understand.
func AppliesAtCreation(m v1alpha1.UpdateMode) bool {
	switch m {
	case v1alpha1.UpdateModeInitial, v1alpha1.UpdateModeRecreate, v1alpha1.UpdateModeInPlaceOrRecreate, v1alpha1.UpdateModeInPlace, v1alpha1.UpdateModeAuto:
		return true
	}
	return false
}

// BoostsAtCreation reports whether a container policy's startupBoost is
// applied in mode m: only where the updater acts on running pods and so
// ends the boost. Under Off and Initial a boost would never end.
func BoostsAtCreation(m v1alpha1.UpdateMode) bool {
	switch m {
	case v1alpha1.UpdateModeRecreate, v1alpha1.UpdateModeInPlaceOrRecreate, v1alpha1.UpdateModeInPlace, v1alpha1.UpdateModeAuto:
		return true
	}
	return false
}

// resourcesInOrder is sorted by name, the order of a ResourceList's keys
// in JSON, so the operations on a list come out in that order too.
var resourcesInOrder = [...]workload.Resource{workload.CPU, workload.Memory}

// containerPlan is the new requests and limits of one container; a field
// is changed only where changed says so.
type containerPlan struct {
	index            int
	name             string
	curReq, curLim   workload.Resources
	newReq, newLim   workload.Resources
	changed          resourceSet
	requestsAndLimit bool
	// boosted: newReq.CPU is a start-up boost over baseCPU (request) and
	// baseCPULimit, the values the container gets back when it ends.
	boosted               bool
	baseCPU, baseCPULimit float64
}

// resourceSet is a set of the resources in resourcesInOrder; a value, not
// a map, because one is made per container of every admitted pod.
type resourceSet struct{ cpu, memory bool }

func (s *resourceSet) has(r workload.Resource) bool {
	if r == workload.Memory {
		return s.memory
	}
	return s.cpu
}

func (s *resourceSet) set(r workload.Resource, v bool) {
	if r == workload.Memory {
		s.memory = v
	} else {
		s.cpu = v
	}
}

// Compute returns the patch for pod under in. The pod is not modified.
func Compute(pod *corev1.Pod, in Input) Result {
	if pod == nil || !AppliesAtCreation(in.Mode) {
		return Result{}
	}
	plans := make([]containerPlan, 0, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		ctr := &pod.Spec.Containers[i]
		plans = append(plans, planContainer(i, ctr, &in))
	}
	capPod(plans, in.Caps.PodMax)
	return render(pod, plans)
}

func planContainer(i int, ctr *corev1.Container, in *Input) containerPlan {
	p := containerPlan{
		index:  i,
		name:   ctr.Name,
		curReq: mpa.Resources(ctr.Resources.Requests),
		curLim: mpa.Resources(ctr.Resources.Limits),
	}
	p.newReq, p.newLim = p.curReq, p.curLim
	pol := in.Constraints.ContainerPolicy(ctr.Name)
	p.requestsAndLimit = pol.ControlledValues != workload.RequestsOnly
	rec, ok := in.Recommendation.Container(ctr.Name)
	if ok && pol.Mode != workload.ContainerModeOff {
		p.size(&rec, &pol, in)
	}
	if BoostsAtCreation(in.Mode) {
		p.boost(pol.StartupBoost, in)
	}
	return p
}

// size sets the recommendation's requests, bounded by the policy and the
// namespace's caps.
func (p *containerPlan) size(rec *workload.ContainerRecommendation, pol *workload.ContainerPolicy, in *Input) {
	for _, r := range resourcesInOrder {
		target := rec.Target.Get(r)
		if !pol.Controls(r) || !positive(target) {
			continue
		}
		req := clamp(target, pol.MinAllowed.Get(r), pol.MaxAllowed.Get(r))
		lim := p.curLim.Get(r)
		if p.requestsAndLimit {
			lim, _ = vpa.ScaleLimit(p.curReq.Get(r), req, lim, maxQuantity(r))
		}
		req, lim = in.Caps.bound(r, req, lim, p.requestsAndLimit)
		p.newReq = p.newReq.With(r, req)
		p.newLim = p.newLim.With(r, lim)
		p.changed.set(r, true)
	}
}

// boost raises the CPU request the container would get (the
// recommendation's, or its own) by b, as VPA's CPU start-up boost does: the
// limit moves with it under RequestsAndLimits, keeping the ratio; under
// RequestsOnly, or without a ratio, the request stays within the limit so
// the pod's QoS class does not change. The boost may exceed the policy's
// maxAllowed (it is temporary) but not the namespace's LimitRange caps,
// which the API server enforces.
func (p *containerPlan) boost(b *workload.CPUBoost, in *Input) {
	if b == nil {
		return
	}
	base, baseLim := p.newReq.CPU, p.newLim.CPU
	req, lim := b.Boosted(base), baseLim
	if lim > 0 {
		if p.requestsAndLimit && base > 0 {
			lim *= req / base
		} else {
			req = min(req, lim)
		}
	}
	req, lim = in.Caps.bound(workload.CPU, req, lim, p.requestsAndLimit)
	if !(req > base) {
		return
	}
	p.boosted, p.baseCPU, p.baseCPULimit = true, base, baseLim
	p.newReq.CPU, p.newLim.CPU = req, lim
	p.changed.set(workload.CPU, true)
}

func maxQuantity(r workload.Resource) float64 {
	if r == workload.Memory {
		return vpa.MaxMemoryQuantity
	}
	return vpa.MaxCPUQuantity
}

func positive(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

// clamp bounds x to [lo, hi]; a zero bound is absent.
func clamp(x, lo, hi float64) float64 {
	if lo > 0 && x < lo {
		x = lo
	}
	if hi > 0 && x > hi {
		x = hi
	}
	return x
}

// capPod scales the changed containers down, in proportion, when the sum
// over the pod would exceed a LimitRange of type Pod. Containers we do not
// size keep their amounts: they are the user's and we cannot shrink them.
func capPod(plans []containerPlan, podMax workload.Resources) {
	for _, r := range resourcesInOrder {
		hi := podMax.Get(r)
		if hi <= 0 {
			continue
		}
		var fixedReq, fixedLim, ownReq, ownLim float64
		for i := range plans {
			if plans[i].changed.has(r) {
				ownReq += plans[i].newReq.Get(r)
				ownLim += plans[i].newLim.Get(r)
			} else {
				fixedReq += plans[i].curReq.Get(r)
				fixedLim += plans[i].curLim.Get(r)
			}
		}
		f := 1.0
		if ownReq > 0 && fixedReq+ownReq > hi {
			f = min(f, (hi-fixedReq)/ownReq)
		}
		if ownLim > 0 && fixedLim+ownLim > hi {
			f = min(f, (hi-fixedLim)/ownLim)
		}
		if f >= 1 {
			continue
		}
		for i := range plans {
			if !plans[i].changed.has(r) {
				continue
			}
			if f <= 0 {
				// The user's own containers already use the whole pod
				// budget; any value of ours fails validation, so keep the
				// pod as it was written and let the user see the error.
				plans[i].newReq = plans[i].newReq.With(r, plans[i].curReq.Get(r))
				plans[i].newLim = plans[i].newLim.With(r, plans[i].curLim.Get(r))
				plans[i].changed.set(r, false)
				continue
			}
			plans[i].newReq = plans[i].newReq.With(r, plans[i].newReq.Get(r)*f)
			plans[i].newLim = plans[i].newLim.With(r, plans[i].newLim.Get(r)*f)
		}
	}
}

// render turns the plans into the minimal patch: nothing for a value that
// does not change, one operation per changed value, and a whole map or
// object only where the pod has none to add into.
func render(pod *corev1.Pod, plans []containerPlan) Result {
	var res Result
	var boosts map[string]mpa.BoostRecord
	var descBuf [96]byte
	for _, p := range plans {
		ctr := &pod.Spec.Containers[p.index]
		var reqs, lims quantities
		desc := append(append(append(descBuf[:0], "container "...), p.name...), ": "...)
		listed := len(desc)
		for k, r := range resourcesInOrder {
			if !p.changed.has(r) {
				continue
			}
			name := corev1.ResourceName(r)
			if q, ok := quantity(r, p.newReq.Get(r)); ok && differs(ctr.Resources.Requests, name, q) {
				reqs.put(k, q)
				desc = appendItem(desc, listed, string(r), " request")
			}
			if q, ok := quantity(r, p.newLim.Get(r)); ok && differs(ctr.Resources.Limits, name, q) {
				lims.put(k, q)
				desc = appendItem(desc, listed, string(r), " limit")
			}
		}
		if p.boosted {
			if rec, ok := boostRecord(&p); ok {
				if boosts == nil {
					boosts = map[string]mpa.BoostRecord{}
				}
				boosts[p.name] = rec
				desc = appendItem(desc, listed, "cpu", " start-up boost")
			}
		}
		if len(desc) == listed {
			continue
		}
		if res.Patch == nil {
			res.Patch = make([]Operation, 0, 2*len(plans)+1)
		}
		res.Updates = append(res.Updates, string(desc))
		res.Patch = resourceOps(res.Patch, p.index, &ctr.Resources, &reqs, &lims)
	}
	if len(res.Patch) == 0 {
		return Result{}
	}
	value := strings.Join(res.Updates, "; ")
	if len(pod.Annotations) == 0 {
		a := map[string]string{UpdatesAnnotation: value}
		if boosts != nil {
			a[mpa.StartupBoostAnnotation] = mpa.EncodeBoost(boosts)
		}
		res.Patch = append(res.Patch, Operation{Op: "add", Path: "/metadata/annotations", Value: a})
		return res
	}
	res.Patch = annotationOp(res.Patch, pod, UpdatesAnnotation, value)
	if boosts != nil {
		res.Patch = annotationOp(res.Patch, pod, mpa.StartupBoostAnnotation, mpa.EncodeBoost(boosts))
	}
	return res
}

// annotationOp sets one annotation of a pod that has some.
func annotationOp(ops []Operation, pod *corev1.Pod, key, value string) []Operation {
	op := "add"
	if _, ok := pod.Annotations[key]; ok {
		op = "replace"
	}
	return append(ops, Operation{Op: op, Path: "/metadata/annotations/" + EscapePointer(key), Value: value})
}

// boostRecord is the annotation entry of a boosted container, in the
// quantities the patch writes; ok is false if, once rounded, the boost
// adds nothing (capPod may have cut it).
func boostRecord(p *containerPlan) (mpa.BoostRecord, bool) {
	boosted, ok := quantity(workload.CPU, p.newReq.CPU)
	if !ok || !(p.newReq.CPU > p.baseCPU) {
		return mpa.BoostRecord{}, false
	}
	rec := mpa.BoostRecord{Boosted: boosted.String()}
	if q, ok := quantity(workload.CPU, p.baseCPU); ok {
		if q.Cmp(boosted) >= 0 {
			return mpa.BoostRecord{}, false
		}
		rec.Request = q.String()
	}
	if q, ok := quantity(workload.CPU, p.baseCPULimit); ok {
		rec.Limit = q.String()
	}
	return rec, true
}

// appendItem appends ", " (unless it is the first item after the first
// listed bytes), resource and what.
func appendItem(desc []byte, listed int, resource, what string) []byte {
	if len(desc) > listed {
		desc = append(desc, ", "...)
	}
	return append(append(desc, resource...), what...)
}

// quantities holds new amounts by position in resourcesInOrder; a value
// rather than a ResourceList, which costs a map per container, because
// most patches replace single amounts and never need the map.
type quantities struct {
	set [len(resourcesInOrder)]bool
	q   [len(resourcesInOrder)]resource.Quantity
}

func (s *quantities) put(k int, q resource.Quantity) { s.set[k], s.q[k] = true, q }

func (s *quantities) empty() bool { return s.set == [len(resourcesInOrder)]bool{} }

// list returns the amounts as a ResourceList, for operations that add a
// whole list.
func (s *quantities) list() corev1.ResourceList {
	out := make(corev1.ResourceList, len(resourcesInOrder))
	for k, r := range resourcesInOrder {
		if s.set[k] {
			out[corev1.ResourceName(r)] = s.q[k]
		}
	}
	return out
}

// quantity converts an amount as mpa.ResourceList does (cores rounded up to
// millicores, bytes rounded up; a test holds the two equal), without its
// map; ok is false for an amount that is not positive and finite.
func quantity(r workload.Resource, v float64) (resource.Quantity, bool) {
	if !positive(v) {
		return resource.Quantity{}, false
	}
	if r == workload.Memory {
		return *resource.NewQuantity(int64(math.Ceil(v-1e-9)), resource.BinarySI), true
	}
	return *resource.NewMilliQuantity(int64(math.Ceil(v*1000-1e-9)), resource.DecimalSI), true
}

func differs(cur corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) bool {
	old, ok := cur[name]
	return !ok || old.Cmp(q) != 0
}

func resourceOps(ops []Operation, i int, cur *corev1.ResourceRequirements, reqs, lims *quantities) []Operation {
	base := "/spec/containers/" + strconv.Itoa(i) + "/resources"
	if len(cur.Requests) == 0 && len(cur.Limits) == 0 && len(cur.Claims) == 0 {
		// Nothing inside resources to keep: one operation sets it whole,
		// and works whether or not the serialised pod has "resources".
		v := corev1.ResourceRequirements{}
		if !reqs.empty() {
			v.Requests = reqs.list()
		}
		if !lims.empty() {
			v.Limits = lims.list()
		}
		return append(ops, Operation{Op: "add", Path: base, Value: v})
	}
	ops = listOps(ops, base+"/requests", cur.Requests, reqs)
	return listOps(ops, base+"/limits", cur.Limits, lims)
}

// listOps emits the operations for one list, by resource name:
// resourcesInOrder is sorted by name.
func listOps(ops []Operation, path string, cur corev1.ResourceList, set *quantities) []Operation {
	if set.empty() {
		return ops
	}
	if len(cur) == 0 {
		return append(ops, Operation{Op: "add", Path: path, Value: set.list()})
	}
	for k, r := range resourcesInOrder {
		if !set.set[k] {
			continue
		}
		op := "add"
		if _, ok := cur[corev1.ResourceName(r)]; ok {
			op = "replace"
		}
		ops = append(ops, Operation{Op: op, Path: path + "/" + EscapePointer(string(r)), Value: set.q[k]})
	}
	return ops
}

// EscapePointer escapes one RFC 6901 reference token: "~" becomes "~0" and
// "/" becomes "~1", in that order so an escaped "/" is not re-escaped.
func EscapePointer(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// String renders an operation for logs.
func (o Operation) String() string { return fmt.Sprintf("%s %s %v", o.Op, o.Path, o.Value) }
