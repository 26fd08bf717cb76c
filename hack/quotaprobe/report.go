package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"

	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// report prints the cells of a cells.json again, their models computed
// by this build (setModels), and the summaries.
func report(path string, tick time.Duration, w io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	var rs []result
	if err := json.Unmarshal(b, &rs); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	if len(rs) == 0 {
		return fmt.Errorf("report %s: no cells", path)
	}
	for i := range rs {
		if !(rs[i].Cores > 0) {
			return fmt.Errorf("report %s: cell %d records no node cores", path, i)
		}
		rs[i].setModels(rs[i].Cores, tick)
		writeRow(w, rs[i], i == 0)
	}
	return writeSummary(w, rs)
}

func writeRow(w io.Writer, r result, header bool) {
	if header {
		fmt.Fprintf(w, "%3s %5s %5s %4s | %6s %7s %7s %5s %5s %5s %6s | %7s %7s %7s %7s %7s %7s %6s %5s %3s\n",
			"rep", "limit", "util", "bg", "req/s", "cpu/req", "burn", "idle", "gc/s", "rho", "thrott",
			"p50", "p95", "model", "ln(r/m)", "m+bg", "ln(r/mb)", "sdlog", "lost", "mxp")
	}
	rho := r.CPU.PerRequest * r.Rate / r.Limit
	fmt.Fprintf(w, "%3d %5.2f %5.2f %4.2f | %6.1f %5.2fms %5.2fms %4.0fm %5.1f %5.2f %5.1f%% | %5.1fms %5.1fms %5.1fms %+7.3f %5.1fms %+7.3f %6.3f %5d %3d\n",
		r.Rep, r.Limit, r.Utilisation, r.Background, r.Rate, 1e3*r.CPU.PerRequest, 1e3*r.CPU.BurnPerRequest, 1e3*r.CPU.Idle, r.CPU.GCPerSecond, rho,
		100*r.CPU.ThrottledShare, 1e3*r.P50, 1e3*r.P95, 1e3*r.ModelP95, logRatio(r, r.ModelP95),
		1e3*r.ModelBackgroundP95, logRatio(r, r.ModelBackgroundP95), r.SDLogP95, r.Lost, r.CPU.GOMAXPROCS)
}

// logRatio is ln(real p95 / model), NaN without a value.
func logRatio(r result, model float64) float64 {
	if !(r.P95 > 0 && model > 0) {
		return math.NaN()
	}
	return math.Log(r.P95 / model)
}

type group struct{ limit, background float64 }

// writeSummary prints, per limit and background, the mean of ln(real p95
// / the model's) over the cells, and per limit the background's paired
// effect on ln p95: the cells of the same limit, utilisation and
// repetition with and without it.
func writeSummary(w io.Writer, rs []result) error {
	tick := "a quota enforced to the instant"
	if t := rs[0].ModelTick; t > 0 {
		tick = fmt.Sprintf("a scheduler tick of %v (sim.Config.NodeTick)", t)
	}
	fmt.Fprintf(w, "\nreal p95 against the CFS quota model's (%s), mean ln(real/model) over utilisations and repetitions (95%% t-interval), the model without a background and with the cell's (sim.Config.NodeBackground):\n", tick)
	byGroup := map[group][]float64{}
	byGroupBg := map[group][]float64{}
	var groups []group
	for _, r := range rs {
		g := group{r.Limit, r.Background}
		if _, ok := byGroup[g]; !ok {
			groups = append(groups, g)
			byGroup[g] = nil
		}
		if v := logRatio(r, r.ModelP95); !math.IsNaN(v) {
			byGroup[g] = append(byGroup[g], v)
		}
		if v := logRatio(r, r.ModelBackgroundP95); !math.IsNaN(v) {
			byGroupBg[g] = append(byGroupBg[g], v)
		}
	}
	slices.SortFunc(groups, func(a, b group) int {
		if a.limit != b.limit {
			return cmp.Compare(a.limit, b.limit)
		}
		return cmp.Compare(a.background, b.background)
	})
	for _, g := range groups {
		if len(byGroup[g]) == 0 {
			fmt.Fprintf(w, "  limit %.2f, background %.2f cores: no cell with a p95 and a model value\n", g.limit, g.background)
			continue
		}
		iv, err := stats.Mean(byGroup[g], 0.95)
		if err != nil {
			return fmt.Errorf("limit %g background %g: %w", g.limit, g.background, err)
		}
		fmt.Fprintf(w, "  limit %.2f, background %.2f cores: %+.3f [%+.3f, %+.3f] (%.2fx) over %d cells",
			g.limit, g.background, iv.Mean, iv.Lo, iv.Hi, math.Exp(iv.Mean), iv.N)
		if g.background > 0 && len(byGroupBg[g]) > 0 {
			ib, err := stats.Mean(byGroupBg[g], 0.95)
			if err != nil {
				return fmt.Errorf("limit %g background %g: %w", g.limit, g.background, err)
			}
			fmt.Fprintf(w, "; with the background in the model %+.3f [%+.3f, %+.3f] (%.2fx)", ib.Mean, ib.Lo, ib.Hi, math.Exp(ib.Mean))
		}
		fmt.Fprintln(w)
	}
	type key struct {
		limit, util float64
		rep         int
	}
	base := map[key]result{}
	for _, r := range rs {
		if r.Background == 0 {
			base[key{r.Limit, r.Utilisation, r.Rep}] = r
		}
	}
	pairs := map[group][2][]float64{}
	for _, r := range rs {
		b, ok := base[key{r.Limit, r.Utilisation, r.Rep}]
		if r.Background == 0 || !ok || !(r.P95 > 0 && b.P95 > 0) {
			continue
		}
		g := group{r.Limit, r.Background}
		p := pairs[g]
		p[0], p[1] = append(p[0], math.Log(r.P95)), append(p[1], math.Log(b.P95))
		pairs[g] = p
	}
	if len(pairs) > 0 {
		fmt.Fprintln(w, "the background's effect on the real p95, paired on (limit, utilisation, repetition), mean ln(with/without):")
	}
	for _, g := range groups {
		p, ok := pairs[g]
		if !ok {
			continue
		}
		iv, err := stats.Paired(p[0], p[1], 0.95)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  limit %.2f, background %.2f cores: %+.3f [%+.3f, %+.3f] (%.2fx) over %d pairs\n",
			g.limit, g.background, iv.Mean, iv.Lo, iv.Hi, math.Exp(iv.Mean), iv.N)
	}
	return nil
}
