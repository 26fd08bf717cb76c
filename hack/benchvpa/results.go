//go:build benchvpa

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

// results is what results.json holds.
type results struct {
	Machine string      `json:"machine"`
	Started time.Time   `json:"started"`
	Webhook []bench.Row `json:"webhook"`
	// WebhookAtScale is the webhook measured again at each scale step.
	WebhookAtScale []webhookPoint `json:"webhookAtScale,omitempty"`
	Scale          []scalePoint   `json:"scale"`
	AwareOnly      []scalePoint   `json:"awareOnly,omitempty"`
	Notes          []string       `json:"notes,omitempty"`
	Options        optionsReport  `json:"options"`
}

type optionsReport struct {
	PodsPerTarget   int     `json:"podsPerTarget"`
	IntervalSeconds float64 `json:"intervalSeconds"`
	Loops           int     `json:"loops"`
	WebhookRate     float64 `json:"webhookRate"`
	WebhookRequests int     `json:"webhookRequests"`
	WebhookRounds   int     `json:"webhookRounds"`
	WebhookClients  int     `json:"webhookClients"`
	WebhookTogether bool    `json:"webhookTogether"`
	KubeAPIQPS      int     `json:"kubeApiQps"`
}

// loopCost is one loop component's cost over a measurement window.
type loopCost struct {
	Loops          float64 `json:"loops"`
	CPUPerLoop     float64 `json:"cpuPerLoopSeconds"`
	RequestsPerLp  float64 `json:"apiRequestsPerLoop"`
	Watches        int64   `json:"watchesOpenedInWindow"`
	RSSBytes       float64 `json:"rssBytes"`
	PeakRSSBytes   float64 `json:"peakRssBytes"`
	WindowSeconds  float64 `json:"windowSeconds"`
	CPUInWindowSec float64 `json:"cpuInWindowSeconds"`
	// CPUTicksInWindowSec is the same from /proc/PID/stat's 10-ms ticks,
	// a check on the thread sum.
	CPUTicksInWindowSec float64 `json:"cpuTicksInWindowSeconds"`
}

type scalePoint struct {
	Targets int `json:"targets"`
	Pods    int `json:"pods"`
	// RunningPods is how many of Pods ran when the components started.
	RunningPods int                 `json:"runningPods"`
	Load        float64             `json:"load1"`
	Cost        map[string]loopCost `json:"cost"` // by process name
}

// writeOutputs writes results.json, results.md and the SVG from what has
// been measured so far, so an interrupted run still leaves its numbers.
func (h *harness) writeOutputs() error {
	b, err := json.MarshalIndent(h.results, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.o.out, "results.json"), b, 0o644); err != nil {
		return err
	}
	md, err := os.Create(filepath.Join(h.o.out, "results.md"))
	if err != nil {
		return err
	}
	defer md.Close()
	if err := writeMarkdown(md, h.results); err != nil {
		return err
	}
	svg, err := os.Create(filepath.Join(h.o.out, "recommender-cpu-per-loop.svg"))
	if err != nil {
		return err
	}
	defer svg.Close()
	if err := costPlot(h.results).WriteSVG(svg); err != nil && len(h.results.Scale) > 0 {
		return err
	}
	return nil
}

// mergeReports combines the results of several runs (e.g. one run per
// scale on a machine that cannot hold every scale in one sitting).
func mergeReports(out string, files []string) error {
	var merged results
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r results
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if merged.Machine == "" {
			merged.Machine, merged.Started, merged.Options = r.Machine, r.Started, r.Options
		}
		if len(merged.Webhook) == 0 {
			merged.Webhook = r.Webhook
		}
		merged.WebhookAtScale = append(merged.WebhookAtScale, r.WebhookAtScale...)
		merged.Scale = append(merged.Scale, r.Scale...)
		merged.AwareOnly = append(merged.AwareOnly, r.AwareOnly...)
		merged.Notes = append(merged.Notes, r.Notes...)
	}
	slices.SortStableFunc(merged.Scale, func(a, b scalePoint) int { return a.Targets - b.Targets })
	slices.SortStableFunc(merged.WebhookAtScale, func(a, b webhookPoint) int { return a.Targets - b.Targets })
	slices.SortStableFunc(merged.AwareOnly, func(a, b scalePoint) int { return a.Targets - b.Targets })
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	h := &harness{o: options{out: out}, results: merged}
	return h.report()
}

func (h *harness) report() error {
	if err := h.writeOutputs(); err != nil {
		return err
	}
	return writeMarkdown(os.Stdout, h.results)
}
