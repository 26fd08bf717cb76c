package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/core/workload"
)

type fakeAdvisor struct {
	calls   int
	removed []string // namespace/name/uid of each Remove
	// stage is the stage answered; "" is Serving, none an agent not reached.
	stage v1alpha1.RLStage
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
	switch f.stage {
	case "":
		return def, &v1alpha1.RLStatus{Source: v1alpha1.SourceAgent, Reason: "AgentActing", Stage: v1alpha1.RLStageServing}
	case "none":
		return def, &v1alpha1.RLStatus{Source: v1alpha1.SourceDefault, Reason: "AgentUnavailable"}
	}
	return def, &v1alpha1.RLStatus{Source: v1alpha1.SourceAgent, Reason: "AgentActing", Stage: f.stage}
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

// TestRLStageChangeEventAndMetric: a change of the stage the agent reports
// is counted and announced with an event, compared with the stage in the
// status after a restart; an unchanged stage and an agent not reached
// announce nothing.
func TestRLStageChangeEventAndMetric(t *testing.T) {
	objs := twoPodWorkload()
	m := objs[0].(*v1alpha1.MultidimPodAutoscaler)
	m.Spec.RL = &v1alpha1.RLSpec{Mode: v1alpha1.RLModeOn}
	// Written by a recommender before a restart.
	m.Status.RL = &v1alpha1.RLStatus{Stage: v1alpha1.RLStageBootstrapping}
	f := newFixture(t, objs...)
	f.usage.set(podUsage("ns", "web-1", 0.4, 256<<20), podUsage("ns", "web-2", 0.4, 256<<20))
	adv := &fakeAdvisor{}
	f.start()
	f.c.advisor = adv
	transitions := func(from, to v1alpha1.RLStage) float64 {
		return testutil.ToFloat64(f.c.metrics.rlStages.WithLabelValues(string(from), string(to)))
	}
	for i, step := range []struct {
		stage     v1alpha1.RLStage
		wantEvent string // "" for none
	}{
		{v1alpha1.RLStageOnlineTraining, "from Bootstrapping to OnlineTraining: the agent acts"},
		{v1alpha1.RLStageOnlineTraining, ""},
		{"none", ""},
		{v1alpha1.RLStageRetraining, "from OnlineTraining to Retraining: the agent's reward degraded"},
	} {
		adv.stage = step.stage
		drainEvents(f.recorder)
		f.tick()
		var got []string
		for _, e := range drainEvents(f.recorder) {
			if strings.Contains(e, ReasonRLStageChanged) {
				got = append(got, e)
			}
		}
		switch {
		case step.wantEvent == "" && len(got) != 0:
			t.Errorf("step %d: unexpected events %v", i, got)
		case step.wantEvent != "" && (len(got) != 1 || !strings.HasPrefix(got[0], "Normal") || !strings.Contains(got[0], step.wantEvent)):
			t.Errorf("step %d: events %v, want one containing %q", i, got, step.wantEvent)
		}
	}
	if a, b := transitions(v1alpha1.RLStageBootstrapping, v1alpha1.RLStageOnlineTraining), transitions(v1alpha1.RLStageOnlineTraining, v1alpha1.RLStageRetraining); a != 1 || b != 1 {
		t.Errorf("transitions counted %v and %v, want 1 each", a, b)
	}
}

func drainEvents(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
