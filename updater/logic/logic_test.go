package logic

import (
	"slices"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

const gi = 1 << 30

// rec: target 1 CPU / 1 GiB, bounds [0.5, 2] CPU and [0.5, 2] GiB.
func testWorkload(mode v1alpha1.UpdateMode, replicas int32, pods ...Pod) *Workload {
	return &Workload{
		Key:  "ns/mpa",
		Mode: mode,
		Recommendation: workload.Recommendation{Replicas: replicas, Containers: []workload.ContainerRecommendation{{
			Name:       "app",
			Target:     workload.Resources{CPU: 1, Memory: gi},
			LowerBound: workload.Resources{CPU: 0.5, Memory: gi / 2},
			UpperBound: workload.Resources{CPU: 2, Memory: 2 * gi},
		}}},
		HasRecommendation:  true,
		RecommendationTime: t0,
		Replicas:           replicas,
		Pods:               pods,
	}
}

// pod with one "app" container at cpu cores and mem GiB, alive, started at
// started.
func pod(name string, cpu, mem float64, started time.Time) Pod {
	return Pod{Name: name, Started: started, Alive: true, Containers: []Container{{
		Name:     "app",
		Requests: workload.Resources{CPU: cpu, Memory: mem * gi},
		Limits:   workload.Resources{CPU: 2 * cpu, Memory: mem * gi},
	}}}
}

func open() Guards {
	return Guards{AdmissionFresh: true}
}

func names(us []PodUpdate) []string {
	var out []string
	for _, u := range us {
		out = append(out, u.Pod+":"+string(u.Action)+":"+string(u.Reason))
	}
	return out
}

func skips(ss []PodSkip) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Pod+":"+string(s.Reason))
	}
	return out
}

func TestVerticalWhichPods(t *testing.T) {
	old := t0.Add(-24 * time.Hour)
	young := t0.Add(-time.Hour)
	cfg := DefaultVerticalConfig()
	cfg.MinReplicas = 1 // this test is about selection, not the floor
	cases := []struct {
		name string
		pods []Pod
		want []string
	}{
		{"within bounds and at target: nothing", []Pod{pod("a", 1, 1, old)}, nil},
		{"below lower bound cpu", []Pod{pod("a", 0.2, 1, young), pod("b", 1, 1, young)}, []string{"a:Evict:OutsideBounds"}},
		{"above upper bound memory", []Pod{pod("b", 1, 1, young), pod("a", 1, 3, young)}, []string{"a:Evict:OutsideBounds"}},
		{"within bounds, drifted 40% but young: wait", []Pod{pod("a", 1.4, 1, young), pod("b", 1, 1, young)}, nil},
		{"within bounds, drifted 40% and old", []Pod{pod("a", 1.4, 1, old), pod("b", 1, 1, old)}, []string{"a:Evict:Drift"}},
		{"within bounds, drifted 5% and old: below threshold", []Pod{pod("a", 1.05, 1, old), pod("b", 1, 1, old)}, nil},
		{"missing request counts as outside", []Pod{pod("a", 0, 1, young), pod("b", 1, 1, young)}, []string{"a:Evict:OutsideBounds"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := testWorkload(v1alpha1.UpdateModeRecreate, int32(len(tc.pods)), tc.pods...)
			p := DecideVertical(t0, cfg, w, open())
			if got := names(p.Updates); !slices.Equal(got, tc.want) {
				t.Errorf("updates = %v, want %v (skips %v)", got, tc.want, skips(p.Skips))
			}
		})
	}
}

func TestVerticalOOMAndPriority(t *testing.T) {
	old := t0.Add(-24 * time.Hour)
	cfg := DefaultVerticalConfig()
	cfg.MinReplicas = 1
	oom := pod("oom", 1, 0.8, t0.Add(-time.Hour)) // within bounds, memory below target
	oom.Containers[0].LastOOMKill = t0.Add(-2 * time.Minute)
	oldOOM := pod("oldoom", 1, 0.8, t0.Add(-time.Hour))
	oldOOM.Containers[0].LastOOMKill = t0.Add(-time.Hour) // outside the OOM window
	w := testWorkload(v1alpha1.UpdateModeRecreate, 6,
		pod("drift-small", 1.3, 1, old),
		pod("drift-big", 1.8, 1, old),
		oldOOM,
		pod("outside", 3, 1, t0.Add(-time.Minute)),
		oom,
		pod("fine", 1, 1, old),
	)
	p := DecideVertical(t0, cfg, w, open())
	want := []string{"outside:Evict:OutsideBounds", "oom:Evict:OOMKilled", "drift-big:Evict:Drift", "drift-small:Evict:Drift"}
	if got := names(p.Updates); !slices.Equal(got, want) {
		t.Errorf("priority order = %v, want %v", got, want)
	}
}

func TestVerticalModesAndPolicies(t *testing.T) {
	for _, mode := range []v1alpha1.UpdateMode{v1alpha1.UpdateModeOff, v1alpha1.UpdateModeInitial} {
		w := testWorkload(mode, 3, pod("a", 5, 1, t0), pod("b", 5, 1, t0), pod("c", 5, 1, t0))
		if p := DecideVertical(t0, DefaultVerticalConfig(), w, open()); len(p.Updates) != 0 || p.Skip != SkipUpdateModeOff {
			t.Errorf("mode %s: updates %v skip %q", mode, names(p.Updates), p.Skip)
		}
	}
	// A container whose policy is Off is left alone even far outside bounds.
	w := testWorkload(v1alpha1.UpdateModeAuto, 3, pod("a", 5, 1, t0), pod("b", 1, 1, t0), pod("c", 1, 1, t0))
	w.Constraints.Containers = []workload.ContainerPolicy{{Name: "app", Mode: workload.ContainerModeOff}}
	if p := DecideVertical(t0, DefaultVerticalConfig(), w, open()); len(p.Updates) != 0 {
		t.Errorf("container mode Off: updates %v", names(p.Updates))
	}
	// Only memory controlled: a CPU outside bounds does not count.
	w.Constraints.Containers = []workload.ContainerPolicy{{Name: "*", Mode: workload.ContainerModeAuto, ControlledResources: []workload.Resource{workload.Memory}}}
	if p := DecideVertical(t0, DefaultVerticalConfig(), w, open()); len(p.Updates) != 0 {
		t.Errorf("cpu not controlled: updates %v", names(p.Updates))
	}
	// No recommendation.
	w = testWorkload(v1alpha1.UpdateModeAuto, 3, pod("a", 5, 1, t0))
	w.HasRecommendation = false
	if p := DecideVertical(t0, DefaultVerticalConfig(), w, open()); p.Skip != SkipNoRecommendation {
		t.Errorf("no recommendation: skip %q", p.Skip)
	}
}

func TestVerticalMinReplicas(t *testing.T) {
	cfg := DefaultVerticalConfig() // MinReplicas 2
	bad := func(n string) Pod { return pod(n, 5, 1, t0) }

	// 4 replicas all outside: evict two, keeping 2 alive.
	w := testWorkload(v1alpha1.UpdateModeRecreate, 4, bad("a"), bad("b"), bad("c"), bad("d"))
	p := DecideVertical(t0, cfg, w, open())
	if len(p.Updates) != 2 || !slices.Equal(skips(p.Skips), []string{"c:MinReplicas", "d:MinReplicas"}) {
		t.Errorf("4 replicas: updates %v skips %v", names(p.Updates), skips(p.Skips))
	}

	// A pod already terminating (evicted last loop) is not alive: only one more.
	term := bad("a")
	term.Alive, term.Terminating = false, true
	w = testWorkload(v1alpha1.UpdateModeRecreate, 4, term, bad("b"), bad("c"), bad("d"))
	if p := DecideVertical(t0, cfg, w, open()); len(p.Updates) != 1 {
		t.Errorf("with one terminating: updates %v skips %v", names(p.Updates), skips(p.Skips))
	}

	// Small workloads under the default policy: never evicted.
	for _, n := range []int{1, 2} {
		var pods []Pod
		for i := range n {
			pods = append(pods, bad(string(rune('a'+i))))
		}
		w = testWorkload(v1alpha1.UpdateModeRecreate, int32(n), pods...)
		if p := DecideVertical(t0, cfg, w, open()); len(p.Updates) != 0 || len(p.Skips) != n || p.Skips[0].Reason != SkipMinReplicas {
			t.Errorf("%d replicas, policy Never: updates %v skips %v", n, names(p.Updates), skips(p.Skips))
		}
	}

	// Policy OutsideBounds: a single replica outside bounds is evicted...
	cfg.SmallWorkloads = SmallWorkloadOutsideBounds
	w = testWorkload(v1alpha1.UpdateModeRecreate, 1, bad("a"))
	if p := DecideVertical(t0, cfg, w, open()); !slices.Equal(names(p.Updates), []string{"a:Evict:OutsideBounds"}) {
		t.Errorf("1 replica, policy OutsideBounds: %v %v", names(p.Updates), skips(p.Skips))
	}
	// ...but never for drift alone...
	w = testWorkload(v1alpha1.UpdateModeRecreate, 1, pod("a", 1.5, 1, t0.Add(-48*time.Hour)))
	if p := DecideVertical(t0, cfg, w, open()); len(p.Updates) != 0 {
		t.Errorf("1 replica drift: %v", names(p.Updates))
	}
	// ...one at a time, and not while a replica is missing.
	w = testWorkload(v1alpha1.UpdateModeRecreate, 2, bad("a"), bad("b"))
	if p := DecideVertical(t0, cfg, w, open()); len(p.Updates) != 1 {
		t.Errorf("2 replicas OutsideBounds: %v", names(p.Updates))
	}
	notReady := bad("b")
	notReady.Alive = false
	w = testWorkload(v1alpha1.UpdateModeRecreate, 2, bad("a"), notReady)
	if p := DecideVertical(t0, cfg, w, open()); len(p.Updates) != 0 {
		t.Errorf("2 replicas, one not alive: %v", names(p.Updates))
	}
}

func TestVerticalRateLimits(t *testing.T) {
	cfg := DefaultVerticalConfig()
	cfg.MinReplicas = 1
	mk := func() *Workload {
		var pods []Pod
		for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
			pods = append(pods, pod(n, 5, 1, t0))
		}
		return testWorkload(v1alpha1.UpdateModeRecreate, 6, pods...)
	}
	global := NewTokenBucket(1, 3) // 1/s, burst 3
	perA := NewTokenBucket(0.1, 2) // 1 per 10 s, burst 2
	perB := NewTokenBucket(0, 0)   // unlimited
	wa, wb := mk(), mk()

	pa := DecideVertical(t0, cfg, wa, Guards{AdmissionFresh: true, Global: global, Workload: perA})
	if len(pa.Updates) != 2 || pa.Skips[0].Reason != SkipWorkloadRateLimit {
		t.Fatalf("workload A: updates %v skips %v", names(pa.Updates), skips(pa.Skips))
	}
	pb := DecideVertical(t0, cfg, wb, Guards{AdmissionFresh: true, Global: global, Workload: perB})
	if len(pb.Updates) != 1 || pb.Skips[0].Reason != SkipGlobalRateLimit {
		t.Fatalf("workload B: updates %v skips %v", names(pb.Updates), skips(pb.Skips))
	}
	// One second later the global bucket has one token again; A's own
	// bucket is still empty, so the token goes to B.
	t1 := t0.Add(time.Second)
	if p := DecideVertical(t1, cfg, mk(), Guards{AdmissionFresh: true, Global: global, Workload: perA}); len(p.Updates) != 0 {
		t.Errorf("A at t+1s: %v", names(p.Updates))
	}
	if p := DecideVertical(t1, cfg, mk(), Guards{AdmissionFresh: true, Global: global, Workload: perB}); len(p.Updates) != 1 {
		t.Errorf("B at t+1s: %v", names(p.Updates))
	}
	// Ten seconds on, A's bucket has refilled one token.
	t2 := t0.Add(11 * time.Second)
	if p := DecideVertical(t2, cfg, mk(), Guards{AdmissionFresh: true, Global: global, Workload: perA}); len(p.Updates) != 1 {
		t.Errorf("A at t+11s: %v %v", names(p.Updates), skips(p.Skips))
	}
}

func TestTokenBucket(t *testing.T) {
	b := NewTokenBucket(2, 2)
	for i := range 2 {
		if !b.Ready(t0) {
			t.Fatalf("token %d not ready", i)
		}
		b.Take(t0)
	}
	if b.Ready(t0) {
		t.Fatal("empty bucket ready")
	}
	if b.Ready(t0.Add(400 * time.Millisecond)) {
		t.Fatal("0.8 tokens counted as one")
	}
	if !b.Ready(t0.Add(500 * time.Millisecond)) {
		t.Fatal("1 token after 0.5 s at 2/s")
	}
	// Refill is capped at burst.
	if got := b.l.TokensAt(t0.Add(time.Hour)); !b.Ready(t0.Add(time.Hour)) || got != 2 {
		t.Fatalf("tokens after an hour = %g, want burst 2", got)
	}
	// Time going backwards neither refills nor panics.
	b.Take(t0.Add(time.Hour))
	b.Take(t0.Add(time.Hour))
	if b.Ready(t0) {
		t.Fatal("refilled by a clock going backwards")
	}
	if !NewTokenBucket(0, 0).Ready(t0) {
		t.Fatal("zero rate must be unlimited")
	}
}

func TestVerticalAdmissionStale(t *testing.T) {
	cfg := DefaultVerticalConfig()
	w := testWorkload(v1alpha1.UpdateModeRecreate, 3, pod("a", 5, 1, t0), pod("b", 1, 1, t0), pod("c", 1, 1, t0))
	p := DecideVertical(t0, cfg, w, Guards{AdmissionFresh: false})
	if len(p.Updates) != 0 || !slices.Equal(skips(p.Skips), []string{"a:AdmissionHeartbeatStale"}) {
		t.Errorf("evictions with a stale heartbeat: %v %v", names(p.Updates), skips(p.Skips))
	}
	// In-place resizes do not depend on the admission controller.
	w.Mode = v1alpha1.UpdateModeInPlaceOrRecreate
	p = DecideVertical(t0, cfg, w, Guards{AdmissionFresh: false})
	if !slices.Equal(names(p.Updates), []string{"a:Resize:OutsideBounds"}) {
		t.Errorf("resize with a stale heartbeat: %v %v", names(p.Updates), skips(p.Skips))
	}
}

func TestVerticalInPlace(t *testing.T) {
	cfg := DefaultVerticalConfig()
	mk := func(p Pod) *Workload {
		return testWorkload(v1alpha1.UpdateModeInPlaceOrRecreate, 3, p, pod("x", 1, 1, t0), pod("y", 1, 1, t0))
	}
	// Resize computes requests = target and limits in proportion.
	p := DecideVertical(t0, cfg, mk(pod("a", 4, 3, t0)), open())
	if len(p.Updates) != 1 || p.Updates[0].Action != ActionResize {
		t.Fatalf("updates %v", names(p.Updates))
	}
	got := p.Updates[0].Resources
	want := []ContainerResources{{Name: "app",
		Requests: workload.Resources{CPU: 1, Memory: gi},
		Limits:   workload.Resources{CPU: 2, Memory: gi}}} // cpu limit/request was 2, memory 1
	if !slices.Equal(got, want) {
		t.Errorf("resources = %+v, want %+v", got, want)
	}
	// RequestsOnly keeps limits.
	w := mk(pod("a", 4, 3, t0))
	w.Constraints.Containers = []workload.ContainerPolicy{{Name: "*", Mode: workload.ContainerModeAuto, ControlledValues: workload.RequestsOnly}}
	p = DecideVertical(t0, cfg, w, open())
	if l := p.Updates[0].Resources[0].Limits; l != (workload.Resources{CPU: 8, Memory: 3 * gi}) {
		t.Errorf("RequestsOnly limits = %+v", l)
	}

	// The spec already holds the target but the kubelet reports the resize
	// infeasible: fall back to eviction at once.
	inf := pod("a", 1, 1, t0)
	inf.Resize, inf.ResizeSince = ResizeInfeasible, t0
	if p := DecideVertical(t0, cfg, mk(inf), open()); !slices.Equal(names(p.Updates), []string{"a:Evict:ResizeInfeasible"}) {
		t.Errorf("infeasible: %v %v", names(p.Updates), skips(p.Skips))
	}
	// Deferred: wait, then fall back after the timeout.
	def := pod("a", 1, 1, t0)
	def.Resize, def.ResizeSince = ResizeDeferred, t0.Add(-time.Minute)
	if p := DecideVertical(t0, cfg, mk(def), open()); len(p.Updates) != 0 || !slices.Equal(skips(p.Skips), []string{"a:ResizePending"}) {
		t.Errorf("deferred 1m: %v %v", names(p.Updates), skips(p.Skips))
	}
	def.ResizeSince = t0.Add(-cfg.ResizeDeferredTimeout)
	if p := DecideVertical(t0, cfg, mk(def), open()); !slices.Equal(names(p.Updates), []string{"a:Evict:ResizeDeferred"}) {
		t.Errorf("deferred past timeout: %v %v", names(p.Updates), skips(p.Skips))
	}
	// Deferred at more than the recommendation now asks: the smaller
	// request is sent at once, in place, before the timeout.
	over := pod("a", 1.5, 1, t0)
	over.Resize, over.ResizeSince = ResizeDeferred, t0.Add(-time.Minute)
	if p := DecideVertical(t0, cfg, mk(over), open()); !slices.Equal(names(p.Updates), []string{"a:Resize:ResizeDeferred"}) {
		t.Errorf("deferred above the target: %v %v", names(p.Updates), skips(p.Skips))
	}
	// The fallback eviction obeys the eviction guards.
	if p := DecideVertical(t0, cfg, mk(def), Guards{}); len(p.Updates) != 0 || p.Skips[0].Reason != SkipAdmissionStale {
		t.Errorf("fallback with stale admission: %v %v", names(p.Updates), skips(p.Skips))
	}
	// In progress and not yet at target: wait.
	prog := pod("a", 4, 1, t0)
	prog.Resize = ResizeInProgress
	if p := DecideVertical(t0, cfg, mk(prog), open()); len(p.Updates) != 0 || !slices.Equal(skips(p.Skips), []string{"a:ResizeInProgress"}) {
		t.Errorf("in progress: %v %v", names(p.Updates), skips(p.Skips))
	}
	// Resize conditions mean nothing in Recreate mode (someone else's resize).
	w = mk(inf)
	w.Mode = v1alpha1.UpdateModeRecreate
	if p := DecideVertical(t0, cfg, w, open()); len(p.Updates) != 0 {
		t.Errorf("Recreate with foreign infeasible resize: %v", names(p.Updates))
	}
}

// In-place resizes spend their own budget, shared by all workloads, and
// neither the eviction budgets nor the admission heartbeat.
func TestVerticalResizeRateLimit(t *testing.T) {
	cfg := DefaultVerticalConfig()
	mk := func() *Workload {
		return testWorkload(v1alpha1.UpdateModeInPlaceOrRecreate, 3, pod("a", 4, 3, t0), pod("b", 4, 3, t0), pod("c", 4, 3, t0))
	}
	resize := NewTokenBucket(1, 2) // 1/s, burst 2
	empty := NewTokenBucket(1, 1)
	empty.Take(t0)
	for _, tc := range []struct {
		name    string
		at      time.Time
		guards  Guards
		updates int
		skips   []string
	}{
		{"burst of 2 of 3", t0, Guards{Resize: resize}, 2, []string{"c:ResizeRateLimit"}},
		{"spent within the second", t0.Add(500 * time.Millisecond), Guards{Resize: resize}, 0, []string{"a:ResizeRateLimit", "b:ResizeRateLimit", "c:ResizeRateLimit"}},
		{"one token a second later", t0.Add(1500 * time.Millisecond), Guards{Resize: resize}, 1, []string{"b:ResizeRateLimit", "c:ResizeRateLimit"}},
		{"eviction budgets do not apply", t0, Guards{Global: empty, Workload: empty}, 3, nil},
		{"nil: unlimited", t0, Guards{}, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DecideVertical(tc.at, cfg, mk(), tc.guards)
			for _, u := range p.Updates {
				if u.Action != ActionResize {
					t.Fatalf("update %v is not a resize", u)
				}
			}
			if len(p.Updates) != tc.updates || !slices.Equal(skips(p.Skips), tc.skips) {
				t.Errorf("updates %v skips %v, want %d updates and skips %v", names(p.Updates), skips(p.Skips), tc.updates, tc.skips)
			}
		})
	}
}

func TestRecommendationFresh(t *testing.T) {
	if RecommendationFresh(t0, time.Time{}, time.Hour) {
		t.Error("missing time is fresh")
	}
	if !RecommendationFresh(t0, t0.Add(-time.Hour), time.Hour) {
		t.Error("exactly max age is stale")
	}
	if RecommendationFresh(t0, t0.Add(-time.Hour-time.Second), time.Hour) {
		t.Error("older than max age is fresh")
	}
}

func TestVerticalConfigValidate(t *testing.T) {
	if err := DefaultVerticalConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	bad := DefaultVerticalConfig()
	bad.MinReplicas, bad.SmallWorkloads, bad.DriftThreshold = 0, "Sometimes", 0
	if err := bad.Validate(); err == nil {
		t.Fatal("invalid config accepted")
	}
}

// TestVerticalEvictsDeadOOMKilledPod: a pod OOM-killed into
// CrashLoopBackOff is not alive, so the live-replica guards (no eviction
// while a replica is missing, none below minReplicas) would keep it forever
// at the memory it dies at. Evicting it takes nothing from the live
// replicas, and its replacement is admitted with the raised memory; a dead
// pod that was not OOM-killed is still left alone.
func TestVerticalEvictsDeadOOMKilledPod(t *testing.T) {
	cfg := DefaultVerticalConfig()
	cfg.MinReplicas = 2
	dead := func(oom bool) Pod {
		p := pod("a", 1, 0.25, t0.Add(-10*time.Minute)) // below the 0.5 GiB lower bound
		p.Alive = false
		if oom {
			p.Containers[0].LastOOMKill = t0.Add(-30 * time.Second)
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		replicas int32
		pods     []Pod
		want     []string
	}{
		{"the only replica, OOM-killed", 1, []Pod{dead(true)}, []string{"a:Evict:OOMKilled"}},
		{"the only replica, dead otherwise", 1, []Pod{dead(false)}, nil},
		{"two replicas, the dead one OOM-killed", 2, []Pod{dead(true), pod("b", 1, 1, t0.Add(-time.Hour))}, []string{"a:Evict:OOMKilled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWorkload(v1alpha1.UpdateModeRecreate, tc.replicas, tc.pods...)
			if p := DecideVertical(t0, cfg, w, open()); !slices.Equal(names(p.Updates), tc.want) {
				t.Errorf("updates %v (skips %v), want %v", names(p.Updates), skips(p.Skips), tc.want)
			}
		})
	}
}

// TestVerticalInPlaceOrRecreateReplacesDeadOOM: in InPlaceOrRecreate mode a
// pod dead of OOM is evicted, not resized (the kubelet leaves the pod's
// cgroup at the old memory limit when a container that is not running is
// resized, kubernetes/kubernetes#138760), even as the only replica; a live
// pod OOM-killed earlier is resized in place as before.
func TestVerticalInPlaceOrRecreateReplacesDeadOOM(t *testing.T) {
	cfg := DefaultVerticalConfig()
	oom := func(alive bool) Pod {
		p := pod("a", 1, 0.25, t0.Add(-10*time.Minute))
		p.Alive, p.Containers[0].LastOOMKill = alive, t0.Add(-30*time.Second)
		return p
	}
	for _, tc := range []struct {
		name     string
		mode     v1alpha1.UpdateMode
		replicas int32
		pods     []Pod
		want     []string
	}{
		{"dead, the only replica: evicted", v1alpha1.UpdateModeInPlaceOrRecreate, 1, []Pod{oom(false)}, []string{"a:Evict:OOMKilled"}},
		{"dead, beside a live replica: evicted", v1alpha1.UpdateModeInPlaceOrRecreate, 2, []Pod{oom(false), pod("b", 1, 1, t0.Add(-time.Hour))}, []string{"a:Evict:OOMKilled"}},
		{"alive again: resized in place", v1alpha1.UpdateModeInPlaceOrRecreate, 1, []Pod{oom(true)}, []string{"a:Resize:OOMKilled"}},
		{"dead, InPlace: resized (it never evicts)", v1alpha1.UpdateModeInPlace, 1, []Pod{oom(false)}, []string{"a:Resize:OOMKilled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWorkload(tc.mode, tc.replicas, tc.pods...)
			if p := DecideVertical(t0, cfg, w, open()); !slices.Equal(names(p.Updates), tc.want) {
				t.Errorf("updates %v (skips %v), want %v", names(p.Updates), skips(p.Skips), tc.want)
			}
		})
	}
}

// InPlace mode never evicts: what InPlaceOrRecreate falls back to eviction
// for waits (deferred, which the kubelet retries) or is reported and held
// (infeasible) until the recommendation changes.
func TestVerticalInPlaceOnly(t *testing.T) {
	cfg := DefaultVerticalConfig()
	mk := func(p Pod) *Workload {
		return testWorkload(v1alpha1.UpdateModeInPlace, 3, p, pod("x", 1, 1, t0), pod("y", 1, 1, t0))
	}
	// The infeasible request is in the spec (the kubelet's case): 4 CPU.
	kubeletInf := pod("a", 4, 1, t0)
	kubeletInf.Resize, kubeletInf.ResizeSince, kubeletInf.ResizeMessage = ResizeInfeasible, t0, "Node didn't have enough capacity: cpu"
	// The API server refused a resize to the target: the spec is the old one.
	refusedInf := pod("a", 0.2, 1, t0)
	refusedInf.Resize, refusedInf.ResizeSince = ResizeInfeasible, t0
	refusedInf.Refused = []ContainerResources{{Name: "app", Requests: workload.Resources{CPU: 1, Memory: gi}, Limits: workload.Resources{CPU: 2, Memory: gi}}}
	refusedOther := refusedInf
	refusedOther.Refused = []ContainerResources{{Name: "app", Requests: workload.Resources{CPU: 3, Memory: gi}, Limits: workload.Resources{CPU: 6, Memory: gi}}}
	deferred := pod("a", 1, 1, t0)
	deferred.Resize, deferred.ResizeSince = ResizeDeferred, t0.Add(-time.Hour) // long past ResizeDeferredTimeout
	dead := pod("a", 1, 0.5, t0)
	dead.Alive = false
	dead.Containers[0].LastOOMKill = t0.Add(-time.Minute)

	cases := []struct {
		name           string
		pod            Pod
		target         float64 // the recommendation's CPU target; 0 keeps 1
		guards         Guards
		updates, skips []string
		infeasible     []string
	}{
		{name: "outside bounds: resized", pod: pod("a", 4, 1, t0), guards: open(), updates: []string{"a:Resize:OutsideBounds"}},
		{name: "resized with a stale admission heartbeat", pod: pod("a", 4, 1, t0), guards: Guards{}, updates: []string{"a:Resize:OutsideBounds"}},
		{name: "deferred for an hour: left to the kubelet", pod: deferred, guards: open(), skips: []string{"a:ResizePending"}},
		{name: "deferred, the recommendation now below it: the smaller resize sent", pod: deferred, target: 0.5, guards: open(), updates: []string{"a:Resize:ResizeDeferred"}},
		{name: "deferred, the recommendation now above it: left to the kubelet", pod: deferred, target: 1.5, guards: open(), skips: []string{"a:ResizePending"}},
		{name: "kubelet infeasible, same recommendation: held and reported", pod: kubeletInf, target: 4, guards: open(),
			skips: []string{"a:ResizeInfeasible"}, infeasible: []string{"a:Node didn't have enough capacity: cpu"}},
		{name: "kubelet infeasible, new recommendation: one more try", pod: kubeletInf, guards: open(), updates: []string{"a:Resize:ResizeInfeasible"}},
		{name: "API refused the same resize: held and reported", pod: refusedInf, guards: open(),
			skips: []string{"a:ResizeInfeasible"}, infeasible: []string{"a:"}},
		{name: "API refused another resize: this one is tried", pod: refusedOther, guards: open(), updates: []string{"a:Resize:ResizeInfeasible"}},
		{name: "OOM-killed and dead: resized, not evicted", pod: dead, guards: open(), updates: []string{"a:Resize:OOMKilled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := mk(tc.pod)
			if tc.target > 0 {
				c := &w.Recommendation.Containers[0]
				c.Target.CPU, c.UpperBound.CPU = tc.target, 2*tc.target
			}
			p := DecideVertical(t0, cfg, w, tc.guards)
			if !slices.Equal(names(p.Updates), tc.updates) || !slices.Equal(skips(p.Skips), tc.skips) {
				t.Errorf("updates %v skips %v, want %v %v", names(p.Updates), skips(p.Skips), tc.updates, tc.skips)
			}
			var inf []string
			for _, r := range p.Infeasible {
				inf = append(inf, r.Pod+":"+r.Message)
			}
			if !slices.Equal(inf, tc.infeasible) {
				t.Errorf("infeasible %v, want %v", inf, tc.infeasible)
			}
			for _, u := range p.Updates {
				if u.Action != ActionResize {
					t.Errorf("InPlace mode planned %s of %s", u.Action, u.Pod)
				}
			}
		})
	}
}

// While a pod of the workload waits for a node, no running pod is evicted:
// its replacement would wait as well. Resizes go on (they keep the pod),
// and the pod that waits may itself be recreated with the recommendation.
func TestVerticalUnschedulable(t *testing.T) {
	cfg := DefaultVerticalConfig()
	cfg.MinReplicas = 1
	young := t0.Add(-time.Minute)
	waiting := func(cpu float64) Pod {
		p := pod("pending", cpu, 1, young)
		p.Alive, p.Unschedulable = false, true
		return p
	}
	deferred := pod("a", 1, 1, young)
	deferred.Resize, deferred.ResizeSince = ResizeDeferred, t0.Add(-cfg.ResizeDeferredTimeout)
	deadOOM := pod("oom", 1, 0.25, young)
	deadOOM.Alive, deadOOM.Containers[0].LastOOMKill = false, t0.Add(-30*time.Second)
	gone := waiting(1)
	gone.Terminating = true
	// Each case has a second live pod at the target, so that without the
	// hold the live-replica floor would let the eviction through.
	for _, tc := range []struct {
		name      string
		mode      v1alpha1.UpdateMode
		pods      []Pod
		want      []string
		wantSkips []string
	}{
		{"outside bounds, Recreate: held", v1alpha1.UpdateModeRecreate,
			[]Pod{pod("a", 0.2, 1, young), waiting(1), pod("b", 1, 1, young)}, nil, []string{"a:Unschedulable"}},
		{"deferred past the timeout: held, not evicted", v1alpha1.UpdateModeInPlaceOrRecreate,
			[]Pod{deferred, waiting(1), pod("b", 1, 1, young)}, nil, []string{"a:Unschedulable"}},
		{"outside bounds, InPlaceOrRecreate: resized in place", v1alpha1.UpdateModeInPlaceOrRecreate,
			[]Pod{pod("a", 0.2, 1, young), waiting(1)}, []string{"a:Resize:OutsideBounds"}, nil},
		{"the waiting pod itself, outside bounds: recreated", v1alpha1.UpdateModeRecreate,
			[]Pod{pod("a", 1, 1, young), waiting(3)}, []string{"pending:Evict:OutsideBounds"}, nil},
		{"a pod dead of OOM: still evicted", v1alpha1.UpdateModeRecreate,
			[]Pod{deadOOM, waiting(1)}, []string{"oom:Evict:OOMKilled"}, nil},
		{"the waiting pod is being deleted: no hold", v1alpha1.UpdateModeRecreate,
			[]Pod{pod("a", 0.2, 1, young), gone, pod("b", 1, 1, young)}, []string{"a:Evict:OutsideBounds"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testWorkload(tc.mode, 3, tc.pods...)
			p := DecideVertical(t0, cfg, w, open())
			if got := names(p.Updates); !slices.Equal(got, tc.want) {
				t.Errorf("updates %v, want %v (skips %v)", got, tc.want, skips(p.Skips))
			}
			if got := skips(p.Skips); !slices.Equal(got, tc.wantSkips) {
				t.Errorf("skips %v, want %v", got, tc.wantSkips)
			}
		})
	}
}
