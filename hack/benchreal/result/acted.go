package result

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Acted is what acted in a run of an agent policy, from the windows'
// Stage and Source.
type Acted struct {
	Policy string
	Rep    int
	// Windows counts the run's windows; Looked those with a stage (the
	// agent answered at least once by then).
	Windows, Looked int
	// Stages counts windows by stage.
	Stages map[string]int
	// Agent counts windows whose applied recommendation was the agent's
	// (source Agent or Safeguard).
	Agent int
	// FirstAgent is the start (seconds from the load's start) of the
	// first such window, -1 if none.
	FirstAgent float64
}

// ActedIn reads r's windows; ok is false when no window has a stage (not
// an agent policy, or a file written before the field).
func ActedIn(r Run) (a Acted, ok bool) {
	a = Acted{Policy: r.Policy, Rep: r.Rep, Windows: len(r.Windows), Stages: map[string]int{}, FirstAgent: -1}
	for _, w := range r.Windows {
		if w.Stage == "" {
			continue
		}
		a.Looked++
		a.Stages[w.Stage]++
		if w.Source == "Agent" || w.Source == "Safeguard" {
			if a.Agent == 0 {
				a.FirstAgent = w.Start
			}
			a.Agent++
		}
	}
	return a, a.Looked > 0
}

// stageOrder is the lifecycle's order, for printing.
var stageOrder = []string{"Bootstrapping", "OnlineTraining", "Serving", "Retraining"}

// WriteActed prints, for every run of an agent policy, its windows by
// stage and how many applied the agent's recommendation; nothing when no
// run has stages.
func WriteActed(w io.Writer, runs []Run) error {
	var rows []Acted
	for _, r := range runs {
		if a, ok := ActedIn(r); ok {
			rows = append(rows, a)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nwhat acted (windows, from the autoscaler's status.rl at each window's last look):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\trep\twindows\tby stage\tagent applied\tfirst agent window (s)")
	for _, a := range rows {
		var stages []string
		for _, s := range stageOrder {
			if n := a.Stages[s]; n > 0 {
				stages = append(stages, fmt.Sprintf("%s %d", s, n))
			}
		}
		var other []string
		for s, n := range a.Stages {
			if !slices.Contains(stageOrder, s) {
				other = append(other, fmt.Sprintf("%s %d", s, n))
			}
		}
		slices.Sort(other)
		stages = append(stages, other...)
		if n := a.Windows - a.Looked; n > 0 {
			stages = append(stages, fmt.Sprintf("none yet %d", n))
		}
		first := "-"
		if a.FirstAgent >= 0 {
			first = fmt.Sprintf("%.0f", a.FirstAgent)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%s\n", a.Policy, a.Rep, a.Windows, strings.Join(stages, ", "), a.Agent, first)
	}
	return tw.Flush()
}

// WriteSLOInputs prints, for every run that read the SLO metrics, the
// windows in which Prometheus answered the recommender's rate and p95
// queries, and what was found missing; nothing when no run did.
func WriteSLOInputs(w io.Writer, runs []Run) error {
	var any bool
	for _, r := range runs {
		any = any || r.SLOMetrics
	}
	if !any {
		return nil
	}
	fmt.Fprintf(w, "\nSLO inputs (windows with traffic in which Prometheus answered the recommender's queries):\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "policy\trep\twindows\twith rate\twith p95\trecommender's rate/latency queries (ok)\tmissing")
	for _, r := range runs {
		if !r.SLOMetrics {
			continue
		}
		var n, rate, p95 int
		for _, x := range r.Windows {
			if x.Sent == 0 {
				continue
			}
			n++
			if x.SLORate > 0 {
				rate++
			}
			if x.SLOP95 > 0 {
				p95++
			}
		}
		missing := r.SLOMissing
		if missing == "" {
			missing = "-"
		}
		queries := "-"
		if q := r.RecommenderQueries; q != nil {
			queries = fmt.Sprintf("%.0f/%.0f", q["requestRate/success"], q["latency/success"])
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", r.Policy, r.Rep, n, rate, p95, queries, missing)
	}
	return tw.Flush()
}
