//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// leaseName is the recommender's default Lease name, the one deploy/
// grants; the tests put it in their own namespace.
const leaseName = "aware-recommender"

// TestRecommenderLeaderElection runs two recommenders on one Lease in the
// test's namespace: exactly one holds it and only that one runs the loop
// and writes status; when the leader is SIGKILLed, the other takes the
// Lease over once it expires and keeps the recommendation fresh.
func TestRecommenderLeaderElection(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "leader")
	grantLeaderElection(t, ns)
	w := startMPAWorkload(t, ns, "hamster", "")

	args := recommenderArgs(ns,
		"--checkpoints-interval=1m",
		"--leader-elect=true",
		"--leader-elect-resource-namespace="+ns,
		"--leader-elect-resource-name="+leaseName,
		// Shorter than client-go's 15s/10s/2s so that the takeover after
		// a kill fits the test, long enough for a loaded 2-core machine.
		"--leader-elect-lease-duration=8s",
		"--leader-elect-renew-deadline=6s",
		"--leader-elect-retry-period=1s",
	)
	recs := []*component{
		startProcess(t, processSpec{Binary: "recommender", Name: "recommender-a", Args: args}),
		startProcess(t, processSpec{Binary: "recommender", Name: "recommender-b", Args: args}),
	}

	var leader, follower *component
	var leaderID string
	if !t.Run("exactly one recommender leads and writes status", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		leader, leaderID = waitLeader(t, ns, recs, "")
		follower = recs[0]
		if follower == leader {
			follower = recs[1]
		}
		t.Logf("%s leads as %s", leader.name, leaderID)
		w.waitRecommendation(t, 3*time.Minute, "a recommendation", time.Time{}, func(*v1alpha1.MultidimPodAutoscaler) error { return nil }, recs...)
		// Let the leader run a few loops; the follower must run none.
		framework.Eventually(t, time.Minute, leader.name+" to run 3 loops", func(ctx context.Context) (bool, error) {
			n, _, err := leader.metric(ctx, "aware_recommender_loop_duration_seconds_count")
			return n >= 3, fmt.Errorf("%g loops: %v", n, err)
		})
		if n := mustMetric(t, leader, "aware_recommender_status_writes_total", "result=success"); n < 1 {
			t.Errorf("the leader %s made %g successful status writes", leader.name, n)
		}
		for _, m := range []string{"aware_recommender_loop_duration_seconds_count", "aware_recommender_status_writes_total"} {
			n, _, err := follower.metric(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("the follower %s has %s %g, want 0", follower.name, m, n)
			}
		}
		if id, ok := acquiredIdentity(t, follower); ok {
			t.Errorf("the follower %s logged acquiring leadership as %s", follower.name, id)
		}
	}) {
		t.FailNow()
	}

	t.Run("the follower takes over when the leader is killed", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		lease, err := tb.Client.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		transitions := ptrValue(lease.Spec.LeaseTransitions)
		leader.kill(t)
		killed := time.Now()
		newLeader, id := waitLeader(t, ns, []*component{follower}, leaderID)
		t.Logf("%s took over as %s %s after the kill", newLeader.name, id, time.Since(killed).Round(time.Second))
		lease, err = tb.Client.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := ptrValue(lease.Spec.LeaseTransitions); got <= transitions {
			t.Errorf("leaseTransitions %d, was %d before the takeover", got, transitions)
		}
		// Fresh: the new leader's own loop confirms the recommendation,
		// twice, after the kill.
		m := w.waitRecommendation(t, 2*time.Minute, "a recommendation after the takeover", killed, func(*v1alpha1.MultidimPodAutoscaler) error { return nil }, follower)
		w.waitRecommendation(t, 2*time.Minute, "a refreshed recommendation after the takeover", m.Status.RecommendationTime.Time, func(*v1alpha1.MultidimPodAutoscaler) error { return nil }, follower)
		if n := mustMetric(t, follower, "aware_recommender_status_writes_total", "result=success"); n < 2 {
			t.Errorf("the new leader %s made %g successful status writes, want at least 2", follower.name, n)
		}
	})
}

// grantLeaderElection gives the recommender's ServiceAccount the Lease
// rights of deploy/'s leader-election Role in ns (where the tests elect,
// so that they do not contend with one another): the Role of
// deploy/recommender is copied, not restated.
func grantLeaderElection(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	objs, err := installObjects()
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.Role
	var binding *rbacv1.RoleBinding
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.Role:
			if o.Name == "aware:recommender" {
				role = o.DeepCopy()
			}
		case *rbacv1.RoleBinding:
			if o.Name == "aware:recommender" {
				binding = o.DeepCopy()
			}
		}
	}
	if role == nil || binding == nil {
		t.Fatal("deploy/ has no Role and RoleBinding aware:recommender (leader election)")
	}
	role.Namespace, binding.Namespace = ns, ns
	if _, err := tb.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitLeader waits until the Lease in ns is held by an identity other
// than not that exactly one of procs logged acquiring, and returns that
// process and identity.
func waitLeader(t *testing.T, ns string, procs []*component, not string) (*component, string) {
	t.Helper()
	var leader *component
	var id string
	framework.Eventually(t, 2*time.Minute, "a new holder of Lease "+ns+"/"+leaseName, func(ctx context.Context) (bool, error) {
		lease, err := tb.Client.CoordinationV1().Leases(ns).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		holder := ptrValue(lease.Spec.HolderIdentity)
		if holder == "" || holder == not {
			return false, fmt.Errorf("holder %q", holder)
		}
		leader, id = nil, holder
		for _, p := range procs {
			got, ok := acquiredIdentity(t, p)
			if !ok {
				continue
			}
			if got != holder {
				return false, fmt.Errorf("%w: %s logged leading as %s, the Lease names %s", framework.ErrPermanent, p.name, got, holder)
			}
			if leader != nil {
				return false, fmt.Errorf("%w: %s and %s both logged leading", framework.ErrPermanent, leader.name, p.name)
			}
			leader = p
		}
		if leader == nil {
			return false, fmt.Errorf("no process logged leading as %s yet (%s)", holder, leaseSummary(lease))
		}
		return true, nil
	})
	return leader, id
}

var acquiredRE = regexp.MustCompile(`"Acquired leadership".* identity="([^"]+)"`)

// acquiredIdentity returns the identity p last logged acquiring the Lease
// with, if it ever did.
func acquiredIdentity(t *testing.T, p *component) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(p.logPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	ms := acquiredRE.FindAllSubmatch(b, -1)
	if len(ms) == 0 {
		return "", false
	}
	return string(ms[len(ms)-1][1]), true
}

func leaseSummary(l *coordinationv1.Lease) string {
	return fmt.Sprintf("holder %q, renewed %v, transitions %d", ptrValue(l.Spec.HolderIdentity), l.Spec.RenewTime, ptrValue(l.Spec.LeaseTransitions))
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
