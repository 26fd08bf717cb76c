package controller

// Sustained API failures. While the API server or etcd is down, nothing the
// recommender could say about it can be written to the cluster: it tells
// the operator in three ways that do not need a working API at the moment
// of the failure.
//   - A gauge, aware_recommender_api_failing_seconds{call}, read from the
//     recommender itself: how long the current run of failures of a call
//     has lasted (0 once it succeeds).
//   - A Warning event on the autoscalers concerned once a run has lasted
//     Config.FailureWarning (StatusWriteFailing, APIReadFailing), repeated
//     every Config.FailureWarning while it lasts. The event recorder
//     retries an event that could not be sent for about two minutes, so
//     the warning of an outage shorter than that lands when the API is
//     back; it lands at once when only these calls fail (e.g. RBAC that no
//     longer lets the recommender list HPAs). The recorder drops an event
//     the API server answers with an error status; the components' sink
//     (pkg/kube/apiclient) has it retry 5xx and 429 answers as it retries an
//     unreachable server, and 401 and 403 answers within a minute of those:
//     a restarted kube-apiserver refuses requests until its RBAC informers
//     have synced, and the recorder sends the warnings queued during the
//     outage one at a time, back to back, at its first attempt after the
//     server listens again, so without that retry one unlucky attempt
//     dropped them all (the flake of TestControlPlaneFaults, docs/faults.md).
//     Any other refusal drops an event, and a repeat recorded after that
//     is another chance; APIReadRecovered, sent after a list succeeded,
//     reports the run in any case.
//   - A Normal event when the call succeeds again: StatusWriteRecovered
//     after any failed status write (the status was stale meanwhile), and
//     APIReadRecovered after reads that had failed for Config.FailureWarning.

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// DefaultFailureWarning is Config.FailureWarning's default.
const DefaultFailureWarning = time.Minute

// Event reasons of sustained API failures and their recovery.
const (
	// ReasonStatusWriteFailing: an autoscaler's status could not be
	// written for Config.FailureWarning.
	ReasonStatusWriteFailing = "StatusWriteFailing"
	// ReasonAPIReadFailing: the recommender's API reads (the list of other
	// autoscalers of the targets) failed for Config.FailureWarning.
	ReasonAPIReadFailing = "APIReadFailing"
	// ReasonAPIReadRecovered: those reads succeed again.
	ReasonAPIReadRecovered = "APIReadRecovered"
)

// The calls of aware_recommender_api_failing_seconds.
const (
	callStatusWrite = "status-write"
	callRivalScan   = "rival-scan"
)

// failures is a run of consecutive failures of one API call.
type failures struct {
	first    time.Time
	attempts int
	err      error
	// warned: the run was reported as sustained (its Warning event), last
	// at lastWarning.
	warned      bool
	lastWarning time.Time
}

// add counts a failure with err at now, and reports whether a Warning is
// due: the run has lasted warnAfter since its first failure, and no
// Warning was reported in the last warnAfter.
func (f *failures) add(now time.Time, err error, warnAfter time.Duration) bool {
	if f.attempts == 0 {
		f.first = now
	}
	f.attempts++
	f.err = err
	if now.Sub(f.first) < warnAfter || (f.warned && now.Sub(f.lastWarning) < warnAfter) {
		return false
	}
	f.warned, f.lastWarning = true, now
	return true
}

// noteReadFailure counts a failed scan of other autoscalers at now, and
// once the run of failures is sustained records APIReadFailing on every
// handled autoscaler, every FailureWarning while it lasts: the rivals of
// their targets are those found before.
// Loop goroutine only.
func (c *Controller) noteReadFailure(handled []*v1alpha1.MultidimPodAutoscaler, now time.Time, err error) {
	f := &c.loop.readFailures
	sustained := f.add(now, err, c.cfg.FailureWarning)
	c.metrics.apiFailing.WithLabelValues(callRivalScan).Set(now.Sub(f.first).Seconds())
	if !sustained || c.recorder == nil {
		return
	}
	for _, m := range handled {
		c.recorder.Eventf(m, corev1.EventTypeWarning, ReasonAPIReadFailing,
			"the API server has failed %d lists of the other autoscalers of the targets over %s (the rivals found before are used); the last error: %v",
			f.attempts, now.Sub(f.first).Round(time.Second), err)
	}
}

// noteReadSuccess ends a run of failed scans, recording APIReadRecovered
// on every handled autoscaler if the run was sustained. Loop goroutine
// only.
func (c *Controller) noteReadSuccess(handled []*v1alpha1.MultidimPodAutoscaler, now time.Time) {
	f := c.loop.readFailures
	c.loop.readFailures = failures{}
	c.metrics.apiFailing.WithLabelValues(callRivalScan).Set(0)
	if !f.warned || c.recorder == nil {
		return
	}
	for _, m := range handled {
		c.recorder.Eventf(m, corev1.EventTypeNormal, ReasonAPIReadRecovered,
			"the other autoscalers of the targets are listed again after %d failed attempts over %s; the last error: %v",
			f.attempts, now.Sub(f.first).Round(time.Second), f.err)
	}
}

// noteWriteFailure remembers a failed status write of key, so that the
// write that succeeds after it can say what happened (writeRecovered), and
// records StatusWriteFailing on the autoscaler once its writes have failed
// for Config.FailureWarning, and every Config.FailureWarning after that
// while they fail.
func (c *Controller) noteWriteFailure(ctx context.Context, key string, err error) {
	now := c.clock.Now()
	c.writes.mu.Lock()
	f := c.writes.writeFailures[key]
	if f == nil {
		f = &failures{}
		c.writes.writeFailures[key] = f
	}
	sustained := f.add(now, err, c.cfg.FailureWarning)
	attempts, first := f.attempts, f.first
	c.setWriteFailingLocked(now)
	c.writes.mu.Unlock()
	if !sustained || c.recorder == nil {
		return
	}
	obj, gerr := c.mpasByKey(key)
	if gerr != nil || obj == nil {
		klog.FromContext(ctx).V(2).Info("No autoscaler to record StatusWriteFailing on", "mpa", key, "err", gerr)
		return
	}
	c.recorder.Eventf(obj, corev1.EventTypeWarning, ReasonStatusWriteFailing,
		"the status cannot be written: %d attempts over %s failed (the status is as old as that); the last error: %v",
		attempts, now.Sub(first).Round(time.Second), err)
}

// writeRecovered records a Normal event StatusWriteRecovered on obj when
// its status was written after failed attempts (the API server or etcd
// was down or restarting): while they fail nothing can be written to the
// cluster, so this event, once it can be written, is what tells the
// operator how long the autoscaler's status was stale and why.
func (c *Controller) writeRecovered(key string, obj *v1alpha1.MultidimPodAutoscaler) {
	now := c.clock.Now()
	c.writes.mu.Lock()
	f := c.writes.writeFailures[key]
	delete(c.writes.writeFailures, key)
	c.setWriteFailingLocked(now)
	c.writes.mu.Unlock()
	if f == nil {
		return
	}
	c.metrics.statusWriteOutages.Inc()
	if c.recorder == nil || obj == nil {
		return
	}
	c.recorder.Eventf(obj, corev1.EventTypeNormal, ReasonStatusWriteRecovered,
		"the status is written again after %d failed attempts over %s; the last error: %v",
		f.attempts, now.Sub(f.first).Round(time.Second), f.err)
}

// forgetWriteFailures drops the failures of key (its autoscaler is gone).
func (c *Controller) forgetWriteFailures(key string) {
	c.writes.mu.Lock()
	defer c.writes.mu.Unlock()
	delete(c.writes.writeFailures, key)
	c.setWriteFailingLocked(c.clock.Now())
}

// setWriteFailingLocked sets the status-write gauge to the longest current
// run of failures over the autoscalers. c.writes.mu must be held.
func (c *Controller) setWriteFailingLocked(now time.Time) {
	var longest time.Duration
	for _, f := range c.writes.writeFailures {
		longest = max(longest, now.Sub(f.first))
	}
	c.metrics.apiFailing.WithLabelValues(callStatusWrite).Set(longest.Seconds())
}
