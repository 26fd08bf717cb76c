package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/mpa"
	"github.com/aware-k8s/aware/pkg/kube/rival"
)

// ReasonConflictingAutoscaler marks an autoscaler whose target another
// autoscaler (HPA, VPA, KEDA, Knative) also acts on.
const ReasonConflictingAutoscaler = mpa.ReasonConflictingAutoscaler

// scanRivals lists the other autoscalers of every target, if any autoscaler
// is handled, at most once per Config.RivalScanInterval: in between it
// answers the last complete scan. A failed scan keeps the rivals of the last
// complete one besides what it read (a rival is never forgotten because a
// list failed), and the next loop scans again. A run of failed scans is
// reported on the handled autoscalers once sustained, and its end then too
// (outage.go).
func (c *Controller) scanRivals(ctx context.Context, handled []*v1alpha1.MultidimPodAutoscaler, now time.Time) map[mpa.Target][]rival.Rival {
	if c.sources.rivals == nil || len(handled) == 0 {
		return nil
	}
	if iv := c.cfg.RivalScanInterval; iv > 0 && !c.loop.lastRivalScan.IsZero() && now.Sub(c.loop.lastRivalScan) < iv {
		return c.loop.lastRivals
	}
	got, err := c.sources.rivals.Scan(ctx, c.cfg.Namespace)
	if err == nil {
		c.loop.lastRivals, c.loop.lastRivalScan = got, now
		c.noteReadSuccess(handled, now)
		return got
	}
	klog.FromContext(ctx).Error(err, "Listing other autoscalers of the targets; keeping the rivals found before")
	c.noteReadFailure(handled, now, err)
	merged := make(map[mpa.Target][]rival.Rival, len(got)+len(c.loop.lastRivals))
	for t, rs := range c.loop.lastRivals {
		merged[t] = rs
	}
	for t, rs := range got {
		for _, r := range rs {
			if !containsRival(merged[t], r) {
				merged[t] = append(merged[t], r)
			}
		}
	}
	return merged
}

func containsRival(rs []rival.Rival, r rival.Rival) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// contested returns the dimensions of m that rivals contest and m's update
// mode would act on: in mode Off (and, for the replicas, Initial) m only
// recommends, which fights nobody, so its recommendation stays whole and
// can be compared with the rivals' before a migration.
func contested(m *v1alpha1.MultidimPodAutoscaler, rivals []rival.Rival) (horizontal, vertical bool) {
	h, v := rival.Contested(rivals)
	mode := mpa.UpdateMode(m)
	return h && mpa.ScalesHorizontally(mode), v && mode != v1alpha1.UpdateModeOff
}

// leaveContested empties the parts of s that rivals contest (contested):
// the replica count for a horizontal rival, the pod resources for a
// vertical one. The updater and the admission webhook then have nothing to
// apply there.
func leaveContested(s *v1alpha1.MultidimPodAutoscalerStatus, m *v1alpha1.MultidimPodAutoscaler, rivals []rival.Rival) {
	h, v := contested(m, rivals)
	if h {
		s.DesiredReplicas = 0
	}
	if v {
		s.Recommendation = nil
	}
}

// rivalMessage is the ConfigUnsupported message for m's rivals: what acts
// on which dimension, what this autoscaler leaves alone, and what to do.
func rivalMessage(m *v1alpha1.MultidimPodAutoscaler, rivals []rival.Rival) string {
	var names []string
	for _, r := range rivals {
		names = append(names, fmt.Sprintf("%s %s (%s)", r.Kind, r.Name, dimensionName(r.Dimension)))
	}
	verb, them := "act", "them"
	if len(rivals) == 1 {
		verb, them = "acts", "it"
	}
	ref := m.Spec.ScaleTargetRef
	msg := fmt.Sprintf("%s also %s on %s/%s: ", strings.Join(names, ", "), verb, ref.Kind, ref.Name)
	h, v := contested(m, rivals)
	var left []string
	if h {
		left = append(left, "replicas (status.desiredReplicas is not set)")
	}
	if v {
		left = append(left, "pod resources (status.recommendation is not set)")
	}
	if len(left) > 0 {
		msg += fmt.Sprintf("this autoscaler leaves %s to %s, so that two controllers do not fight over it", strings.Join(left, " and "), them)
	} else {
		msg += fmt.Sprintf("with updateMode %s this autoscaler only recommends there; set to act, it would leave that to %s", mpa.UpdateMode(m), them)
	}
	return msg + fmt.Sprintf(". Delete %s to let this autoscaler take over (docs/api.md, migrating from HPA and VPA)", them)
}

func dimensionName(d rival.Dimension) string {
	if d == rival.Vertical {
		return "pod resources"
	}
	return "replicas"
}
