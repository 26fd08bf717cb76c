package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RetrainingMetricName is the gauge registerRetraining registers.
const RetrainingMetricName = "aware_rlagent_retraining_longest_seconds"

// registerRetraining registers a gauge of how long the workload longest in
// Retraining has been there, read at every scrape. A stay is bounded by
// --retrain-max-episodes (5 hours at the defaults), but only episodes end
// it: a workload whose episodes stop completing (its calls stopped, or
// fail) stays in Retraining, on the defaults, until forgotten. The count of
// workloads per stage cannot show that while others come and go.
func (s *Server) registerRetraining(r prometheus.Registerer) error {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: RetrainingMetricName,
		Help: "How long the workload that has been in the Retraining stage longest has been in it, in seconds; 0 when none is.",
	}, func() float64 { return s.registry.longestRetraining(s.opts.Now()).Seconds() })
	if err := r.Register(g); err != nil {
		return fmt.Errorf("register %s: %w", RetrainingMetricName, err)
	}
	return nil
}
