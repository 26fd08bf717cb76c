//go:build benchvpa

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

// fixedRateConns bounds the requests in flight of an open-loop run.
const fixedRateConns = 64

// webhookAgg sums one side's runs of one mode over the rounds.
type webhookAgg struct {
	lat     []float64 // ms
	cpu     float64   // server CPU seconds
	n, errs int
	elapsed time.Duration
	dials   int // connections opened inside the measured runs
	// wakeups is how many times the server's threads were put on a CPU.
	wakeups uint64
	// idle is the server's CPU seconds per second with no request, over
	// idleWindow before the rounds (fixed-rate sums only); idleSet says it
	// was measured.
	idle    float64
	idleSet bool
	loadSum float64
	loadN   int
}

// webhookPoint is the webhook measured with a given number of targets in
// the namespace: each side's admission controller then holds that many
// autoscalers, Deployments and pods in its informers while it finds the
// one that governs the admitted pod.
type webhookPoint struct {
	Targets int         `json:"targets"`
	Rows    []bench.Row `json:"rows"`
}

// webhookPhase measures both webhooks on target 0's pods and returns the
// rows; nTargets > 0 is the number of targets then in the namespace, named
// in every row (0: the measure before any scale step, whose rows keep the
// names of earlier results).
func (h *harness) webhookPhase(ctx context.Context, targets []webhookTarget, nTargets int) ([]bench.Row, error) {
	o := h.o
	// Each side admits a pod of its own Deployment of target 0; the two
	// pods differ only in their names. The floor gets ours.
	bodiesOf := map[string][][]byte{}
	for _, t := range targets {
		name := awareName(0)
		if t.side == "VPA" {
			name = vpaName(0)
		}
		pod, err := podTemplateFor(ctx, h.tb.Client, name)
		if err != nil {
			return nil, err
		}
		if bodiesOf[t.side], err = reviewBodies(pod, o.webhookRequests); err != nil {
			return nil, err
		}
	}
	// One client per side: neither waits on the other's connection pool.
	clients := map[string]*loadClient{}
	for _, t := range targets {
		c, err := webhookClient(h.tb.CAFile, max(fixedRateConns, o.closedConns))
		if err != nil {
			return nil, err
		}
		clients[t.side] = c
	}
	// Both must patch the pod before anything is timed (their informers
	// sync after start).
	for _, t := range targets {
		var last error
		for i := 0; i < 60; i++ {
			if last = checkPatched(ctx, clients[t.side], t, bodiesOf[t.side][0]); last == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if last != nil {
			return nil, last
		}
	}
	logf("%d webhooks patch the pod; %d rounds of %d requests per side, fixed rate %.0f/s and closed loop with %d clients",
		len(targets), o.webhookRounds, o.webhookRequests, o.webhookRate, o.closedConns)
	// Warm-up, not recorded, in both modes: connections and TLS sessions
	// up to the fixed-rate concurrency, caches, lazily grown pools.
	for _, t := range targets {
		for _, rate := range []float64{o.webhookRate, 0} {
			if _, err := runLoad(ctx, clients[t.side], t, bodiesOf[t.side][:min(1000, o.webhookRequests)], rate, fixedRateConns, 30*time.Second); err != nil {
				return nil, err
			}
		}
	}
	fixed := map[string]*webhookAgg{}
	closed := map[string]*webhookAgg{}
	for _, t := range targets {
		fixed[t.side], closed[t.side] = &webhookAgg{}, &webhookAgg{}
	}
	// What each server spends with no request at all (informers, leases,
	// timers): at a fixed rate it is part of the CPU per request.
	idle, err := idleCPU(ctx, targets, idleWindow)
	if err != nil {
		return nil, err
	}
	for side, c := range idle {
		fixed[side].idle, fixed[side].idleSet = c, true
	}
	budget := time.Duration(float64(o.webhookRequests)/o.webhookRate*float64(time.Second))*3 + 10*time.Second
	for r := 0; r < o.webhookRounds; r++ {
		order := targets
		if r%2 == 1 {
			order = slices.Clone(targets)
			slices.Reverse(order)
		}
		for _, mode := range []struct {
			rate float64
			into map[string]*webhookAgg
		}{{o.webhookRate, fixed}, {0, closed}} {
			conns := o.closedConns
			if mode.rate > 0 {
				conns = fixedRateConns
			}
			record := func(t webhookTarget, res loadResult) {
				a := mode.into[t.side]
				a.lat = append(a.lat, res.latencies...)
				a.cpu += res.cpu
				a.n += len(res.latencies)
				a.errs += res.errors
				a.elapsed += res.elapsed
				a.dials += res.dials
				a.wakeups += res.wakeups
				a.loadSum += loadAvg()
				a.loadN++
			}
			if mode.rate > 0 && o.webhookTogether {
				// Both sides in the same seconds: a stall of the machine
				// lands in both sides' tails.
				res := make([]loadResult, len(order))
				errs := make([]error, len(order))
				var wg sync.WaitGroup
				for i, t := range order {
					wg.Go(func() { res[i], errs[i] = runLoad(ctx, clients[t.side], t, bodiesOf[t.side], mode.rate, conns, budget) })
				}
				wg.Wait()
				if err := errors.Join(errs...); err != nil {
					return nil, err
				}
				for i, t := range order {
					record(t, res[i])
				}
				continue
			}
			for _, t := range order {
				res, err := runLoad(ctx, clients[t.side], t, bodiesOf[t.side], mode.rate, conns, budget)
				if err != nil {
					return nil, err
				}
				record(t, res)
			}
		}
		logf("webhook round %d/%d done", r+1, o.webhookRounds)
	}
	rows, notes := webhookRows(fixed, closed, o.webhookRate, o.closedConns, nTargets)
	for _, n := range notes {
		h.note(n)
	}
	_ = bench.WriteTable(os.Stderr, rows)
	return rows, nil
}

// idleWindow is how long the servers' idle CPU is sampled.
const idleWindow = 10 * time.Second

// idleCPU returns each target's CPU seconds per second over window, with
// no request sent.
func idleCPU(ctx context.Context, targets []webhookTarget, window time.Duration) (map[string]float64, error) {
	before := map[string]float64{}
	for _, t := range targets {
		u, err := t.proc.sample()
		if err != nil {
			return nil, err
		}
		before[t.side] = u.cpu
	}
	start := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	elapsed := time.Since(start).Seconds()
	out := map[string]float64{}
	for _, t := range targets {
		u, err := t.proc.sample()
		if err != nil {
			return nil, err
		}
		out[t.side] = (u.cpu - before[t.side]) / elapsed
	}
	return out, nil
}

// webhookRows turns both sides' sums into the ratio table's rows (nTargets
// as in webhookPhase) and notes of failed requests.
func webhookRows(fixed, closed map[string]*webhookAgg, rate float64, clients, nTargets int) (rows []bench.Row, notes []string) {
	pcts := func(a *webhookAgg) []float64 {
		p, err := bench.Percentiles(a.lat, 50, 99, 99.9)
		if err != nil {
			return []float64{0, 0, 0}
		}
		return p
	}
	fo, fv := pcts(fixed["AWARE"]), pcts(fixed["VPA"])
	co, cv := pcts(closed["AWARE"]), pcts(closed["VPA"])
	load := func(m map[string]*webhookAgg) float64 {
		return (m["AWARE"].loadSum + m["VPA"].loadSum) / float64(max(m["AWARE"].loadN+m["VPA"].loadN, 1))
	}
	perReq := func(a *webhookAgg) float64 { return a.cpu / float64(max(a.n, 1)) * 1e6 }
	perSec := func(a *webhookAgg) float64 {
		if a.elapsed <= 0 {
			return 0
		}
		return float64(a.n) / a.elapsed.Seconds()
	}
	at := ""
	if nTargets > 0 {
		at = fmt.Sprintf(", %d targets", nTargets)
	}
	fr := fmt.Sprintf("%.0f req/s", rate) + at
	cl := fmt.Sprintf("closed loop, %d clients", clients) + at
	lf, lc := load(fixed), load(closed)
	rows = []bench.Row{
		{Measure: "webhook p50, " + fr, Unit: "ms", Ours: fo[0], VPA: fv[0], Load: lf},
		{Measure: "webhook p99, " + fr, Unit: "ms", Ours: fo[1], VPA: fv[1], Goal: 0.6, Load: lf},
		{Measure: "webhook p99.9, " + fr, Unit: "ms", Ours: fo[2], VPA: fv[2], Load: lf},
		{Measure: "webhook server CPU per request, " + fr, Unit: "µs", Ours: perReq(fixed["AWARE"]), VPA: perReq(fixed["VPA"]), Load: lf},
		{Measure: "webhook throughput, " + cl, Unit: "req/s", Ours: perSec(closed["AWARE"]), VPA: perSec(closed["VPA"]), Load: lc},
		{Measure: "webhook p50, " + cl, Unit: "ms", Ours: co[0], VPA: cv[0], Load: lc},
		{Measure: "webhook p99, " + cl, Unit: "ms", Ours: co[1], VPA: cv[1], Load: lc},
		{Measure: "webhook p99.9, " + cl, Unit: "ms", Ours: co[2], VPA: cv[2], Load: lc},
		{Measure: "webhook server CPU per request, closed loop" + at, Unit: "µs", Ours: perReq(closed["AWARE"]), VPA: perReq(closed["VPA"]), Load: lc},
	}
	// Net of idle: the fixed-rate CPU per request less what the server
	// spent in the same seconds with no request.
	net := func(a *webhookAgg) float64 {
		return (a.cpu - a.idle*a.elapsed.Seconds()) / float64(max(a.n, 1)) * 1e6
	}
	// A server's threads sleep between requests at a fixed rate and are
	// woken for each one; closed-loop, they rarely sleep. The wake-ups
	// (with the runtime's search for work around each) are what a request
	// costs beyond its handling.
	wakes := func(a *webhookAgg) float64 { return float64(a.wakeups) / float64(max(a.n, 1)) }
	rows = append(rows,
		bench.Row{Measure: "webhook server thread wake-ups per request, " + fr, Ours: wakes(fixed["AWARE"]), VPA: wakes(fixed["VPA"]), Load: lf},
		bench.Row{Measure: "webhook server thread wake-ups per request, closed loop" + at, Ours: wakes(closed["AWARE"]), VPA: wakes(closed["VPA"]), Load: lc})
	if fixed["AWARE"].idleSet && fixed["VPA"].idleSet {
		rows = append(rows,
			bench.Row{Measure: "webhook server CPU at idle" + at, Unit: "ms/s", Ours: fixed["AWARE"].idle * 1e3, VPA: fixed["VPA"].idle * 1e3, Load: lf},
			bench.Row{Measure: "webhook server CPU per request net of idle, " + fr, Unit: "µs", Ours: net(fixed["AWARE"]), VPA: net(fixed["VPA"]), Load: lf})
	}
	sides := []string{"AWARE", "VPA"}
	if ff, fc := fixed[floorSide], closed[floorSide]; ff != nil && fc != nil {
		// The floor against VPA, in the AWARE column: how far below VPA any
		// Go webhook on this stack can get.
		ffo, fco := pcts(ff), pcts(fc)
		rows = append(rows,
			bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) p50, " + fr, Unit: "ms", Ours: ffo[0], VPA: fv[0], Load: lf},
			bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) p99, " + fr, Unit: "ms", Ours: ffo[1], VPA: fv[1], Load: lf},
			bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) server CPU per request, " + fr, Unit: "µs", Ours: perReq(ff), VPA: perReq(fixed["VPA"]), Load: lf},
			bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) p99, " + cl, Unit: "ms", Ours: fco[1], VPA: cv[1], Load: lc},
			bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) server CPU per request, closed loop" + at, Unit: "µs", Ours: perReq(fc), VPA: perReq(closed["VPA"]), Load: lc},
		)
		rows = append(rows,
			bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) server thread wake-ups per request, " + fr, Ours: wakes(ff), VPA: wakes(fixed["VPA"]), Load: lf},
			bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) server thread wake-ups per request, closed loop" + at, Ours: wakes(fc), VPA: wakes(closed["VPA"]), Load: lc})
		if ff.idleSet && fixed["VPA"].idleSet {
			rows = append(rows, bench.Row{Measure: "floor (a minimal Go webhook, AWARE column) server CPU per request net of idle, " + fr, Unit: "µs", Ours: net(ff), VPA: net(fixed["VPA"]), Load: lf})
		}
		sides = append(sides, floorSide)
	}
	for _, side := range sides {
		if e := fixed[side].errs + closed[side].errs; e > 0 {
			notes = append(notes, fmt.Sprintf("%s webhook%s: %d failed requests (not in the latencies)", side, at, e))
		}
		// The API server keeps its connections to a webhook alive; a
		// handshake inside a measured run is a cost it would not pay.
		if d := fixed[side].dials + closed[side].dials; d > 0 {
			notes = append(notes, fmt.Sprintf("%s webhook%s: %d connections opened inside the measured runs (TLS handshakes included in its numbers)", side, at, d))
		}
	}
	return rows, notes
}

var authUser = authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller",
	Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}

func rawExt(b []byte) k8sruntime.RawExtension { return k8sruntime.RawExtension{Raw: b} }
