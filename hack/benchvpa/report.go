//go:build benchvpa

package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

const mib = 1 << 20

// scaleRows turns one scale point into the ratio table's rows. A side that
// finished no loop in the window has no per-loop cost: its rows are left
// out and a note says so.
func scaleRows(sp scalePoint) (rows []bench.Row, notes []string) {
	for _, c := range []struct{ comp, ours, vpa string }{
		{"recommender", "aware-recommender", "vpa-recommender"},
		{"updater", "aware-updater", "vpa-updater"},
	} {
		o, ok1 := sp.Cost[c.ours]
		v, ok2 := sp.Cost[c.vpa]
		if !ok1 || !ok2 {
			if ok1 != ok2 {
				notes = append(notes, fmt.Sprintf("%d targets: only one of %s and %s was measured", sp.Targets, c.ours, c.vpa))
			}
			continue
		}
		if o.Loops == 0 || v.Loops == 0 {
			notes = append(notes, fmt.Sprintf("%d targets: %s finished %v loops and %s %v in the window; no per-loop cost", sp.Targets, c.ours, o.Loops, c.vpa, v.Loops))
		} else {
			cpuGoal := 0.0
			if c.comp == "recommender" {
				cpuGoal = 0.2
			}
			rows = append(rows,
				bench.Row{Measure: fmt.Sprintf("%s CPU per loop, %d targets", c.comp, sp.Targets), Unit: "ms", Ours: o.CPUPerLoop * 1e3, VPA: v.CPUPerLoop * 1e3, Goal: cpuGoal, Load: sp.Load},
				bench.Row{Measure: fmt.Sprintf("%s API requests per loop, %d targets", c.comp, sp.Targets), Ours: o.RequestsPerLp, VPA: v.RequestsPerLp, Load: sp.Load})
		}
		rssGoal := 0.0
		if c.comp == "recommender" {
			rssGoal = 1
		}
		rows = append(rows, bench.Row{Measure: fmt.Sprintf("%s RSS, %d targets", c.comp, sp.Targets), Unit: "MiB", Ours: o.RSSBytes / mib, VPA: v.RSSBytes / mib, Goal: rssGoal, Load: sp.Load})
	}
	return rows, notes
}

func writeMarkdown(w io.Writer, r results) error {
	fmt.Fprintf(w, "Machine: %s. Started %s.\n\n", r.Machine, r.Started.Format("2006-01-02 15:04 MST"))
	together := "one side after the other"
	if r.Options.WebhookTogether {
		together = "both sides at the same time"
	}
	fmt.Fprintf(w, "Options: %d pods per target, loop interval %gs for all four loop components, %d loops per window, client QPS %d for all components; webhook: %d rounds × %d requests per side per mode, fixed rate %.0f req/s (%s), closed loop with %d clients (one side after the other).\n\n",
		r.Options.PodsPerTarget, r.Options.IntervalSeconds, r.Options.Loops, r.Options.KubeAPIQPS, r.Options.WebhookRounds, r.Options.WebhookRequests, r.Options.WebhookRate, together, r.Options.WebhookClients)
	if len(r.Webhook) > 0 {
		fmt.Fprintln(w, "### Admission webhook")
		fmt.Fprintln(w)
		if err := bench.WriteTable(w, r.Webhook); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(r.WebhookAtScale) > 0 {
		fmt.Fprintln(w, "### Admission webhook at each scale")
		fmt.Fprintln(w)
		fmt.Fprintln(w, webhookAtScaleSummary(r))
		if err := bench.WriteTable(w, webhookAtScaleRows(r)); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	notes := r.Notes
	if len(r.Scale) > 0 {
		fmt.Fprintln(w, "### Recommender and updater at scale")
		fmt.Fprintln(w)
		var rows []bench.Row
		for _, sp := range r.Scale {
			if sp.RunningPods > 0 && sp.RunningPods < sp.Pods {
				notes = append(notes, fmt.Sprintf("%d targets: %d of the %d pods were running when the components started (the rest Pending: KWOK could not start them in time)", sp.Targets, sp.RunningPods, sp.Pods))
			}
			rs, ns := scaleRows(sp)
			rows = append(rows, rs...)
			notes = append(notes, ns...)
		}
		if err := bench.WriteTable(w, rows); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(r.AwareOnly) > 0 {
		fmt.Fprintln(w, "### AWARE's recommender alone")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| MPAs | pods running | CPU per loop | API requests per loop | RSS | loops in window | load (1 min) |")
		fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
		for _, sp := range r.AwareOnly {
			c := sp.Cost["aware-recommender"]
			// The namespace's pods, all watched: the MPAs' and, from the
			// shared scales, the VPAs' (results before 2026-11-27 noon
			// recorded only the number expected).
			pods := sp.Pods
			if sp.RunningPods > 0 {
				pods = sp.RunningPods
			}
			fmt.Fprintf(w, "| %d | %d | %s ms | %s | %s MiB | %v | %.2f |\n", sp.Targets, pods, bench.Num(c.CPUPerLoop*1e3), bench.Num(c.RequestsPerLp), bench.Num(c.RSSBytes/mib), c.Loops, sp.Load)
		}
		fmt.Fprintln(w)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	return nil
}

// costPlot is recommender and updater CPU per loop against the number of
// targets, both sides (AWARE's recommender alone continues its line).
func costPlot(r results) bench.Plot {
	series := []bench.Series{
		{Name: "AWARE recommender", Color: "#1f77b4"},
		{Name: "VPA recommender", Color: "#d62728"},
		{Name: "AWARE updater", Color: "#2ca02c"},
		{Name: "VPA updater", Color: "#ff7f0e"},
	}
	names := []string{"aware-recommender", "vpa-recommender", "aware-updater", "vpa-updater"}
	for _, sp := range append(append([]scalePoint{}, r.Scale...), r.AwareOnly...) {
		for i, n := range names {
			if c, ok := sp.Cost[n]; ok && c.Loops > 0 && c.CPUPerLoop > 0 {
				series[i].Points = append(series[i].Points, bench.Point{X: float64(sp.Targets), Y: c.CPUPerLoop * 1e3})
			}
		}
	}
	var keep []bench.Series
	for _, s := range series {
		if len(s.Points) > 0 {
			keep = append(keep, s)
		}
	}
	return bench.Plot{Title: "CPU per loop against number of targets (lower is better)", XLabel: "targets (an MPA and a VPA, each on its own Deployment)", YLabel: "CPU per loop (ms)", Series: keep}
}

// webhookAtScaleRows are the rows of every webhook measure at a scale
// step, by number of targets.
func webhookAtScaleRows(r results) []bench.Row {
	var rows []bench.Row
	for _, p := range r.WebhookAtScale {
		rows = append(rows, p.Rows...)
	}
	return rows
}

// webhookAtScaleSummary is one line per measure of the webhook's goal (the
// fixed-rate p99): its ratio before the scale steps and at each, so how
// the ratio moves with the number of targets reads at a glance.
func webhookAtScaleSummary(r results) string {
	ratio := func(rows []bench.Row) string {
		for _, row := range rows {
			if row.Goal > 0 {
				return fmt.Sprintf("%s against %s ms, %.2f× (%s)", bench.Num(row.Ours), bench.Num(row.VPA), row.Ratio(), row.Verdict())
			}
		}
		return "not measured"
	}
	var b strings.Builder
	b.WriteString("Fixed-rate p99, AWARE against VPA:")
	if len(r.Webhook) > 0 {
		fmt.Fprintf(&b, " before the scale steps (1 target): %s;", ratio(r.Webhook))
	}
	for i, p := range r.WebhookAtScale {
		sep := ";"
		if i == len(r.WebhookAtScale)-1 {
			sep = "."
		}
		fmt.Fprintf(&b, " %d targets: %s%s", p.Targets, ratio(p.Rows), sep)
	}
	b.WriteString("\n")
	return b.String()
}
