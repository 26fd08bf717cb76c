//go:build benchvpa

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

// loopMetric is the counter of completed loops of each loop component.
func loopMetric(p *proc) (string, map[string]string) {
	switch p.name {
	case "aware-recommender":
		return "aware_recommender_loop_duration_seconds", nil
	case "aware-updater":
		return "aware_updater_loop_duration_seconds", nil
	case "vpa-recommender":
		return "vpa_recommender_execution_latency_seconds", map[string]string{"step": "total"}
	default:
		return "vpa_updater_execution_latency_seconds", map[string]string{"step": "total"}
	}
}

func loops(ctx context.Context, p *proc) (float64, error) {
	name, labels := loopMetric(p)
	return p.metric(ctx, name, labels)
}

// measureLoops measures each process between loop boundaries: it waits
// for the warm-up loop to end (the first one lists everything and loads
// history), takes a sample as the next loop ends, and another when o.loops
// more have ended (or, if a side's loops are slow, at the last loop end
// before the deadline). The window is thus whole loops and the idle time
// between them, whatever the loop's length; all processes run at the same
// time, so the machine's noise hits both sides.
func (h *harness) measureLoops(ctx context.Context, ps []*proc, targets int) (map[string]loopCost, error) {
	type result struct {
		name string
		cost loopCost
		err  error
	}
	deadline := time.Now().Add(time.Duration(h.o.loops+2)*h.o.interval + h.o.maxWait)
	ch := make(chan result, len(ps))
	var profiles sync.WaitGroup
	defer profiles.Wait()
	for _, p := range ps {
		go func() {
			c, err := h.measureOne(ctx, p, deadline, func() {
				if p.profileURL == "" {
					return
				}
				profiles.Add(1)
				go func() {
					defer profiles.Done()
					path := filepath.Join(h.o.out, fmt.Sprintf("cpu-%s-%d.pprof", p.name, targets))
					if err := fetchProfile(ctx, p.profileURL, h.o.profile, path); err != nil {
						logf("%s: no CPU profile: %v", p.name, err)
						return
					}
					logf("%s: CPU profile of %s in %s", p.name, h.o.profile, path)
				}()
			})
			ch <- result{p.name, c, err}
		}()
	}
	out := map[string]loopCost{}
	var errs []error
	for range ps {
		r := <-ch
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		out[r.name] = r.cost
		c := r.cost
		logf("%s: %.0f loops in %.0f s, %.3f s CPU per loop, %.1f API requests per loop, RSS %.0f MiB", r.name, c.Loops, c.WindowSeconds, c.CPUPerLoop, c.RequestsPerLp, c.RSSBytes/(1<<20))
	}
	return out, errors.Join(errs...)
}

// loopPoll is how often the harness looks at the loop starts its proxy
// has seen: an in-memory read that costs the component nothing.
const loopPoll = 250 * time.Millisecond

// warmupLoops are the loops before a window opens: the first lists
// everything and loads history, the second still writes most statuses.
const warmupLoops = 2

// measureOne measures p between loop starts (measureLoops); opened is
// called as its window opens.
//
// The boundaries are the request each loop component makes once as each
// loop starts (bench.LoopMarker), seen by its counting proxy, which samples
// the process's CPU, RSS and requests from /proc and its own counters right
// then. So nothing inside the window costs either side CPU: the harness
// scraped each side's /metrics every 2 s before, which was 16% of our
// recommender's CPU per loop at 100 targets (docs/results/performance.md). The
// window from the start of loop warmupLoops+1 to the start of loop
// warmupLoops+1+loops holds whole loops and the idle time after each.
// After the window (outside it) the loop counter is read once from
// /metrics to check that the markers were one per loop.
func (h *harness) measureOne(ctx context.Context, p *proc, deadline time.Time, opened func()) (loopCost, error) {
	// wait returns the n-th loop start (1-based) once the proxy has seen
	// it; ok is false if the deadline passed first.
	wait := func(n int) (mark, bool, error) {
		for {
			ms := p.proxy.markers()
			if len(ms) >= n {
				return ms[n-1], true, ms[n-1].err
			}
			if err := p.alive(); err != nil {
				return mark{}, false, err
			}
			if time.Now().After(deadline) {
				return mark{}, false, nil
			}
			select {
			case <-time.After(loopPoll):
			case <-ctx.Done():
				return mark{}, false, ctx.Err()
			}
		}
	}
	open := warmupLoops + 1
	first, ok, err := wait(open)
	if err != nil || !ok {
		return loopCost{}, errors.Join(err, fmt.Errorf("%s started %d loops only by the deadline", p.name, len(p.proxy.markers())))
	}
	opened()
	last, lastN := first, open
	for lastN < open+h.o.loops {
		m, ok, err := wait(lastN + 1)
		if err != nil {
			return loopCost{}, err
		}
		if !ok {
			break
		}
		last, lastN = m, lastN+1
	}
	n := float64(lastN - open)
	if n == 0 {
		return loopCost{}, fmt.Errorf("%s finished no loop inside the window by the deadline", p.name)
	}
	// The check, outside the window: markers seen up to the window's end
	// against the loops the component counts.
	if counted, err := loops(ctx, p); err != nil {
		h.note(fmt.Sprintf("%s: loop counter not read after the window: %v", p.name, err))
	} else if !bench.MarkersMatchLoops(int64(lastN), counted) {
		h.note(fmt.Sprintf("%s: %d loop-start requests but %.0f loops counted by its metrics: the window is not %0.f whole loops", p.name, lastN, counted, n))
	}
	c := loopCost{Loops: n, WindowSeconds: last.at.Sub(first.at).Seconds(),
		CPUInWindowSec: last.u.cpu - first.u.cpu, CPUTicksInWindowSec: last.u.cpuTicks - first.u.cpuTicks,
		RSSBytes: last.u.rss, PeakRSSBytes: last.u.peak, Watches: last.u.watches - first.u.watches}
	c.CPUPerLoop = c.CPUInWindowSec / n
	c.RequestsPerLp = float64(last.u.requests-first.u.requests) / n
	return c, nil
}

// note adds a note to the results (safe from the measuring goroutines).
func (h *harness) note(s string) {
	h.notesMu.Lock()
	defer h.notesMu.Unlock()
	h.results.Notes = append(h.results.Notes, s)
	logf("%s", s)
}

func (h *harness) scalePhase(ctx context.Context) error {
	prev := 1
	for _, n := range h.o.scales {
		if err := createTargets(ctx, h.tb.Client, h.dyn, prev, n, int32(h.o.replicas), true, 2*n*h.o.replicas, logf); err != nil {
			return fmt.Errorf("%d targets: %w", n, err)
		}
		prev = n
		running, err := runningPods(ctx, h.tb.Client)
		if err != nil {
			return err
		}
		if running > 2*n*h.o.replicas {
			// BENCH_VPA_USE_RUNNING with a larger earlier run's objects still
			// in the namespace: both sides watch all of it.
			h.note(fmt.Sprintf("%d targets: the namespace holds %d running pods, more than this scale's %d (an earlier run's targets): this point measures more targets than its label", n, running, 2*n*h.o.replicas))
		}
		if h.o.webhookAtScales && !h.o.skipWebhook {
			// Before the loop components start, so they do not share the
			// machine with it: each admission controller now has n
			// autoscalers and their Deployments and pods in its informers.
			logf("%d targets, %d pods running: measuring both webhooks", n, running)
			rows, err := h.webhookPhase(ctx, h.webhooks, n)
			if err != nil {
				return fmt.Errorf("%d targets: webhook: %w", n, err)
			}
			h.results.WebhookAtScale = append(h.results.WebhookAtScale, webhookPoint{Targets: n, Rows: rows})
			if err := h.writeOutputs(); err != nil {
				return err
			}
		}
		if h.o.skipLoops {
			continue
		}
		logf("%d targets, %d pods running: starting both recommenders and updaters", n, running)
		ps, err := h.loopProcs(ctx, "AWARE", "VPA")
		if err != nil {
			return err
		}
		load0 := loadAvg()
		cost, err := h.measureLoops(ctx, ps, n)
		for _, p := range ps {
			h.stopProc(p)
		}
		// What was measured is kept even if a side did not finish its
		// loops in time: the report says which.
		h.results.Scale = append(h.results.Scale, scalePoint{Targets: n, Pods: 2 * n * h.o.replicas, RunningPods: running, Load: (load0 + loadAvg()) / 2, Cost: cost})
		if err := h.writeOutputs(); err != nil {
			return err
		}
		if err != nil {
			return fmt.Errorf("%d targets: %w", n, err)
		}
	}
	if h.o.awareOnlyScale > prev && !h.o.skipLoops {
		n := h.o.awareOnlyScale
		// Only MPAs beyond the shared scales: VPA does not run here.
		if err := createTargets(ctx, h.tb.Client, h.dyn, prev, n, int32(h.o.replicas), false, (n+prev)*h.o.replicas, logf); err != nil {
			return fmt.Errorf("%d MPAs: %w", n, err)
		}
		running, err := runningPods(ctx, h.tb.Client)
		if err != nil {
			return err
		}
		// The recommender alone: the updater is not part of this measure,
		// and at 10,000 MPAs and 15,000 pods it did not sync its caches
		// within the 90 s a component has to become ready.
		logf("%d MPAs, %d pods running: starting AWARE's recommender alone", n, running)
		rec, err := h.awareLoop(ctx, "recommender")
		if err != nil {
			return err
		}
		load0 := loadAvg()
		cost, err := h.measureLoops(ctx, []*proc{rec}, n)
		h.stopProc(rec)
		if err != nil {
			return fmt.Errorf("%d MPAs: %w", n, err)
		}
		h.results.AwareOnly = append(h.results.AwareOnly, scalePoint{Targets: n, Pods: (n + prev) * h.o.replicas, RunningPods: running, Load: (load0 + loadAvg()) / 2, Cost: cost})
	}
	return nil
}
