// Package safeguard implements FaaSRM's safeguard as a wrapper around any
// workload.Policy: a downward vertical step is refused, and the user's
// allocation restored, when the workload's recent peak usage reached a high
// fraction (90% by default) of its allocation.
//
// The rule guards learned policies against their most expensive mistake:
// shrinking a container that is already near its limit, which turns into
// throttling or an OOM kill before the policy sees any reward for it. It
// only ever blocks shrinking; growing and horizontal scaling pass through,
// except that with Options.Restore a container held below its user
// allocation (harvested, as FaaSRM does) gets it back once its recent peak
// reaches the threshold of what it holds (pkg/lab/faas).
//
// The package is pure: time and observations come in through Recommend.
package safeguard

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aware-k8s/aware/pkg/core/workload"
)

// Name prefix of the wrapped policy, as reported by Name.
const namePrefix = "safeguard"

// Defaults.
const (
	DefaultThreshold = 0.9
	DefaultWindow    = 5
)

// Hot is the safeguard's rule for one resource: an allocation alloc > 0
// whose recent peak reached threshold of it is not to be shrunk. The
// policy wrapper here and the learner's action mask (pkg/rl/learn) both
// decide with it.
func Hot(peak, alloc, threshold float64) bool {
	return alloc > 0 && peak >= threshold*alloc
}

// Options configure the safeguard. The zero value means the defaults.
type Options struct {
	// Threshold is the fraction of the allocation that recent peak usage
	// must reach for a downward step to be refused; in (0, 1]. Zero means
	// DefaultThreshold.
	Threshold float64
	// Window is how many recent observations (including the current one)
	// count as "recent"; the peak is the maximum of their
	// ContainerObservation.Peak. Zero means DefaultWindow.
	Window int
	// UserAllocation, when set, returns the allocation the user declared for
	// a container (for example the pod template's requests before any
	// autoscaling). When nil, or when it reports false, the current request
	// is restored instead, which is the allocation in force.
	UserAllocation func(container string) (workload.Resources, bool)
	// Restore also gives a container its user allocation back when the
	// allocation in force is below the user's in a resource whose recent
	// peak reached Threshold × that allocation, whatever the inner policy
	// recommends: FaaSRM's rule for functions harvested from, which a
	// policy holding (or growing) a harvested allocation would otherwise
	// keep starving. It needs UserAllocation; the user allocation's
	// resources are taken whole, as a downward step's are.
	Restore bool
}

func (o Options) withDefaults() Options {
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	return o
}

// Validate rejects options that cannot be used (after defaulting).
func (o Options) Validate() error {
	o = o.withDefaults()
	var errs []error
	if !(o.Threshold > 0 && o.Threshold <= 1) {
		errs = append(errs, fmt.Errorf("threshold must be in (0, 1], got %g", o.Threshold))
	}
	if o.Window < 1 {
		errs = append(errs, fmt.Errorf("window must be >= 1, got %d", o.Window))
	}
	if o.Restore && o.UserAllocation == nil {
		errs = append(errs, errors.New("restore needs the user allocation"))
	}
	return errors.Join(errs...)
}

// Policy wraps another policy with the safeguard. It is not safe for
// concurrent use (it keeps the recent peaks of one workload), like the
// policies it wraps.
type Policy struct {
	inner workload.Policy
	opts  Options
	// peaks holds, per container name, the Peak of the last Window
	// observations as a ring. Invariant: len(ring) <= Window.
	peaks map[string]*peakRing
}

type peakRing struct {
	vals []workload.Resources
	next int
}

func (r *peakRing) push(v workload.Resources, window int) {
	if len(r.vals) < window {
		r.vals = append(r.vals, v)
		return
	}
	r.vals[r.next] = v
	r.next = (r.next + 1) % window
}

func (r *peakRing) max() workload.Resources {
	var m workload.Resources
	for _, v := range r.vals {
		m.CPU = math.Max(m.CPU, v.CPU)
		m.Memory = math.Max(m.Memory, v.Memory)
	}
	return m
}

var _ workload.Policy = (*Policy)(nil)

// Wrap returns inner guarded by the safeguard.
func Wrap(inner workload.Policy, opts Options) (*Policy, error) {
	if inner == nil {
		return nil, errors.New("safeguard: nil policy")
	}
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("safeguard: invalid options: %w", err)
	}
	return &Policy{inner: inner, opts: opts.withDefaults(), peaks: map[string]*peakRing{}}, nil
}

// NewPolicyFactory wraps every policy that inner creates.
func NewPolicyFactory(inner workload.PolicyFactory, opts Options) workload.PolicyFactory {
	return func(c workload.Constraints) (workload.Policy, error) {
		p, err := inner(c)
		if err != nil {
			return nil, err
		}
		return Wrap(p, opts)
	}
}

// Name implements workload.Policy.
func (p *Policy) Name() string { return namePrefix + "(" + p.inner.Name() + ")" }

// Recommend implements workload.Policy. It records the observation's peaks
// (whatever the inner policy does, so the window stays current), asks the
// inner policy, and for every container whose recommended CPU or memory is
// below its current request (or, with Restore, whose current request is
// below the user's) while the recent peak of that resource reached
// Threshold × the current request, replaces the container's recommendation
// with the user's allocation. Replicas are left as recommended.
func (p *Policy) Recommend(ctx context.Context, obs workload.Observation) (workload.Recommendation, error) {
	if err := obs.Validate(); err != nil {
		return workload.Recommendation{}, fmt.Errorf("safeguard: invalid observation: %w", err)
	}
	for _, c := range obs.Containers {
		r := p.peaks[c.Name]
		if r == nil {
			r = &peakRing{}
			p.peaks[c.Name] = r
		}
		r.push(c.Peak, p.opts.Window)
	}
	rec, err := p.inner.Recommend(ctx, obs)
	if err != nil {
		return rec, err
	}
	out := rec
	out.Containers = append([]workload.ContainerRecommendation(nil), rec.Containers...)
	var reasons []string
	for i, cr := range out.Containers {
		cur, ok := obs.Container(cr.Name)
		if !ok {
			continue // nothing to compare with: not a step from a known allocation
		}
		peak := p.peaks[cr.Name].max()
		user, known := cur.Requests, false
		if p.opts.UserAllocation != nil {
			if u, ok := p.opts.UserAllocation(cr.Name); ok {
				user, known = u, true
			}
		}
		var hot []string
		for _, res := range []workload.Resource{workload.CPU, workload.Memory} {
			alloc := cur.Requests.Get(res)
			down := cr.Target.Get(res) < alloc
			harvested := p.opts.Restore && known && alloc < user.Get(res)
			if !(down || harvested) {
				continue // neither a downward step nor a harvested one
			}
			if Hot(peak.Get(res), alloc, p.opts.Threshold) {
				hot = append(hot, fmt.Sprintf("%s peak %.3g >= %.0f%% of request %.3g", res, peak.Get(res), 100*p.opts.Threshold, alloc))
			}
		}
		if len(hot) == 0 {
			continue
		}
		out.Containers[i] = workload.ContainerRecommendation{
			Name: cr.Name, Target: user, LowerBound: user, UpperBound: user, UncappedTarget: user,
		}
		reasons = append(reasons, fmt.Sprintf("container %q: refused downward step or harvested allocation (%s), restored user allocation", cr.Name, strings.Join(hot, ", ")))
	}
	if len(reasons) == 0 {
		return rec, nil
	}
	out.Source = workload.SourceSafeguard
	out.Reason = strings.Join(reasons, "; ")
	if rec.Reason != "" {
		out.Reason += " (policy: " + rec.Reason + ")"
	}
	return out, nil
}
