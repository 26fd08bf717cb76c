package controller

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/workload"
)

type fakeAdvisor struct {
	calls   int
	removed []string // namespace/name/uid of each Remove
}

var (
	_ Advisor = (*fakeAdvisor)(nil)
	_ Remover = (*fakeAdvisor)(nil)
)

func (f *fakeAdvisor) Remove(_ context.Context, namespace, name string, uid types.UID) error {
	f.removed = append(f.removed, namespace+"/"+name+"/"+string(uid))
	return nil
}

func (f *fakeAdvisor) Advise(_ context.Context, _ *v1alpha1.MultidimPodAutoscaler, _ *workload.Observation, _ *workload.Constraints, def workload.Recommendation) (workload.Recommendation, *v1alpha1.RLStatus) {
	f.calls++
	def.Replicas = 4
	return def, &v1alpha1.RLStatus{Source: v1alpha1.SourceAgent, Reason: "AgentActing", Stage: v1alpha1.RLStageServing}
}

func TestRLModes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mode       v1alpha1.RLMode
		advisor    bool
		wantReason string
		wantCalls  int
	}{
		{"off never asks", v1alpha1.RLModeOff, true, "RLOff", 0},
		{"on without endpoint", v1alpha1.RLModeOn, false, "NoAgentEndpoint", 0},
		{"on asks the agent", v1alpha1.RLModeOn, true, "AgentActing", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := twoPodWorkload()
			objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.RL = &v1alpha1.RLSpec{Mode: tc.mode}
			f := newFixture(t, objs...)
			f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
			adv := &fakeAdvisor{}
			f.start()
			if tc.advisor {
				f.c.advisor = adv
			}
			f.tick()
			m := f.mpa("ns", "web")
			if m.Status.RL == nil || m.Status.RL.Reason != tc.wantReason || adv.calls != tc.wantCalls {
				t.Fatalf("rl %+v, calls %d; want reason %s and %d calls", m.Status.RL, adv.calls, tc.wantReason, tc.wantCalls)
			}
			if tc.wantCalls == 1 && (m.Status.DesiredReplicas != 4 || m.Status.RL.Source != v1alpha1.SourceAgent) {
				t.Fatalf("the advisor's recommendation was not written: %+v", m.Status)
			}
			wantCond(t, m, v1alpha1.RecommendationProvided, corev1.ConditionTrue, "RecommendationProvided")
		})
	}
}

// TestDeletedAutoscalerReachesTheAgent: when an autoscaler the agent was
// asked about is deleted, or deleted and re-created under the same name
// (a new UID), the agent is told to forget the old UID, once; autoscalers
// it was never asked about (RL Off) cost no call.
func TestDeletedAutoscalerReachesTheAgent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mode     v1alpha1.RLMode
		recreate bool
		want     []string
	}{
		{"deleted", v1alpha1.RLModeOn, false, []string{"ns/web/uid-web"}},
		{"re-created", v1alpha1.RLModeShadow, true, []string{"ns/web/uid-web"}},
		{"never asked", v1alpha1.RLModeOff, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := twoPodWorkload()
			objs[0].(*v1alpha1.MultidimPodAutoscaler).Spec.RL = &v1alpha1.RLSpec{Mode: tc.mode}
			f := newFixture(t, objs...)
			f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
			adv := &fakeAdvisor{}
			f.start()
			f.c.advisor = adv
			f.tick()
			mpas := f.client.AutoscalingV1alpha1().MultidimPodAutoscalers("ns")
			if err := mpas.Delete(context.Background(), "web", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if tc.recreate {
				m := newMPA("ns", "web")
				m.UID = "uid-web-2"
				m.Spec.RL = &v1alpha1.RLSpec{Mode: tc.mode}
				if _, err := mpas.Create(context.Background(), m, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			f.sync()
			f.tick()
			f.tick()
			if fmt.Sprint(adv.removed) != fmt.Sprint(tc.want) {
				t.Fatalf("removed %v, want %v", adv.removed, tc.want)
			}
		})
	}
}
