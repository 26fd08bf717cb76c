package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/lab/chart"
	"github.com/aware-k8s/aware/pkg/lab/sim"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// The embedding experiment asks whether Meta-PPO's workload embedding
// identifies the workload: for held-out apps, do apps the embedding finds
// alike have alike hidden parameters? Each app is served for one episode
// (greedy, e.Base.EpisodeSteps windows of the first AdaptTraces kind) by
// the pre-trained Meta-PPO; the app's embedding is the mean of the
// embeddings of the episode's full windows (every decision whose window
// holds Window steps), as the agent computed them while acting.
//
// The parameter similarity of two apps is minus the Euclidean distance
// between their hidden parameters (HiddenParams: log CPU time per
// request, log memory per request, pod start-up delay, I/O share of the
// request's time), each standardised to mean 0 and standard deviation 1
// over the seed's apps; the embedding similarity is the cosine of their
// embeddings. The measure is Spearman's ρ between the two over the pairs
// of apps (stats.PairRankCorrelation).

// ExperimentEmbedding is the embedding experiment.
const ExperimentEmbedding = "embedding"

// EmbeddedApp is one held-out app's embedding.
type EmbeddedApp struct {
	App   string           `json:"app"`
	Class sim.SegmentClass `json:"class"`
	// Params are HiddenParams; Embedding the mean embedding of the
	// episode's full windows; MeanState the mean state over the same
	// decisions (the control: what the state alone says about the app).
	Params    []float64 `json:"params"`
	Embedding []float64 `json:"embedding"`
	MeanState []float64 `json:"meanState"`
	// Predicted is the auxiliary head's mean prediction of AuxTarget
	// over the same windows, when the learner has a head.
	Predicted []float64 `json:"predicted,omitempty"`
	// Windows is how many full windows were embedded; Reward the
	// episode's mean reward.
	Windows int     `json:"windows"`
	Reward  float64 `json:"reward"`
	// PC holds the embedding's coordinates on the seed's first two
	// principal components (the plot's axes).
	PC []float64 `json:"pc"`
}

// EmbeddingResult is the embedding experiment on one seed.
type EmbeddingResult struct {
	Seed uint64        `json:"seed"`
	Apps []EmbeddedApp `json:"apps"`
	// Rho is Spearman's ρ between embedding cosine similarity and
	// parameter similarity over the pairs of apps, with a bootstrap
	// interval over the apps.
	Rho stats.Interval `json:"rho"`
	// ParamRho is the same for each hidden parameter alone (minus the
	// distance of its standardised value), in HiddenParamNames order.
	ParamRho []float64 `json:"paramRho"`
	// StateRho is Rho with the cosine of the mean states instead of the
	// embeddings: what the embedding adds over the state is Rho − StateRho.
	StateRho float64 `json:"stateRho"`
	// AuxRho is, when the learner has an auxiliary head, Spearman's ρ
	// over the apps between each hidden parameter and the head's
	// prediction of it (HiddenParamNames order; NaN without spread).
	AuxRho []float64 `json:"auxRho,omitempty"`
	// Explained is the variance share of the two principal components.
	Explained []float64 `json:"explained"`
}

// RankResamples is the number of bootstrap draws behind every rank
// correlation's interval.
const RankResamples = 2000

// embedder is a learner that exposes its workload embedding (Meta-PPO).
type embedder interface {
	EmbedBatch(windows [][]nn.Step) ([][]float64, error)
}

var _ embedder = metaLearner{}

// EmbedBatch returns the embeddings of the windows (nn.MetaPPO).
func (l metaLearner) EmbedBatch(windows [][]nn.Step) ([][]float64, error) {
	return l.m.EmbedBatch(windows)
}

// auxPredictor is a learner with an auxiliary head (Options.AuxWeight).
type auxPredictor interface {
	AuxDim() int
	PredictAux(windows [][]nn.Step) ([][]float64, error)
}

var _ auxPredictor = metaLearner{}

// AuxDim is the size of the learner's auxiliary head, 0 without one.
func (l metaLearner) AuxDim() int { return l.m.Config().AuxDim }

// PredictAux returns the auxiliary head's predictions for the windows.
func (l metaLearner) PredictAux(windows [][]nn.Step) ([][]float64, error) {
	return l.m.PredictAux(windows)
}

// RunEmbedding embeds each of e.Apps held-out apps with the pre-trained
// Meta-PPO and measures how the embedding ranks the apps' similarity.
func RunEmbedding(ctx context.Context, e EvidenceOptions, pre *Pretrained) (*EmbeddingResult, error) {
	em, ok := pre.Meta.(embedder)
	if !ok {
		return nil, fmt.Errorf("embedding experiment: the %s learner has no embedding", pre.Meta.Kind())
	}
	apps, err := EvidenceApps(e.Seed, e.Apps)
	if err != nil {
		return nil, err
	}
	if len(apps) < 3 {
		return nil, fmt.Errorf("embedding experiment: needs at least 3 apps, got %d", len(apps))
	}
	cfg := e.Base.SimConfig()
	kind := sim.TraceKind(e.AdaptTraces[0])
	full := pre.Meta.WindowLen()
	out := &EmbeddingResult{Seed: e.Seed}
	for i, app := range apps {
		ro := runEpisode(ctx, pre.Meta, spec{
			index: i, stage: lifecycle.Serving, app: app, kind: kind, seed: mix(e.Seed, 0x656d626564+uint64(i)),
		}, cfg, e.Base)
		if ro.err != nil {
			return nil, fmt.Errorf("embedding experiment, %s: %w", app.Name, ro.err)
		}
		var windows [][]nn.Step
		var states [][]float64
		for _, t := range ro.transitions {
			if len(t.Window) >= full {
				windows = append(windows, t.Window)
				states = append(states, t.State)
			}
		}
		if len(windows) == 0 {
			return nil, fmt.Errorf("embedding experiment, %s: no window of %d steps in %d windows (episode too short)", app.Name, full, len(ro.transitions))
		}
		es, err := em.EmbedBatch(windows)
		if err != nil {
			return nil, fmt.Errorf("embedding experiment, %s: %w", app.Name, err)
		}
		ea := EmbeddedApp{
			App: app.Name, Class: app.DominantClass(), Params: HiddenParams(app),
			Embedding: columnMeans(es), MeanState: columnMeans(states), Windows: len(windows), Reward: ro.ep.MeanReward,
		}
		if ap, ok := pre.Meta.(auxPredictor); ok && ap.AuxDim() == len(HiddenParamNames) {
			ps, err := ap.PredictAux(windows)
			if err != nil {
				return nil, fmt.Errorf("embedding experiment, %s: %w", app.Name, err)
			}
			ea.Predicted = columnMeans(ps)
		}
		out.Apps = append(out.Apps, ea)
	}
	if err := out.measure(); err != nil {
		return nil, fmt.Errorf("embedding experiment: %w", err)
	}
	return out, nil
}

// measure computes the rank correlations and the projection from Apps.
func (r *EmbeddingResult) measure() error {
	set, err := r.pairSet()
	if err != nil {
		return err
	}
	if r.Rho, err = stats.PairRankCorrelation([]stats.PairSet{set}, 0.95, RankResamples, r.Seed); err != nil {
		return err
	}
	z := standardised(r.Apps)
	r.ParamRho = nil
	for k := range HiddenParamNames {
		p := stats.PairSet{A: set.A, B: pairs(len(z), func(i, j int) float64 { return -math.Abs(z[i][k] - z[j][k]) })}
		rho, err := stats.PairRankCorrelation([]stats.PairSet{p}, 0.95, 1, r.Seed)
		if err != nil {
			// A parameter without spread (e.g. a factor that made every
			// start-up delay equal) ranks nothing.
			rho.Mean = math.NaN()
		}
		r.ParamRho = append(r.ParamRho, rho.Mean)
	}
	st := stats.PairSet{A: pairs(len(r.Apps), func(i, j int) float64 { return cosine(r.Apps[i].MeanState, r.Apps[j].MeanState) }), B: set.B}
	if rho, err := stats.PairRankCorrelation([]stats.PairSet{st}, 0.95, 1, r.Seed); err == nil {
		r.StateRho = rho.Mean
	} else {
		r.StateRho = math.NaN()
	}
	r.AuxRho = nil
	if r.Apps[0].Predicted != nil {
		for k := range HiddenParamNames {
			var truth, pred []float64
			for _, a := range r.Apps {
				truth, pred = append(truth, a.Params[k]), append(pred, a.Predicted[k])
			}
			rho, err := stats.Spearman(truth, pred)
			if err != nil {
				return err
			}
			r.AuxRho = append(r.AuxRho, rho)
		}
	}
	points := make([][]float64, len(r.Apps))
	for i, a := range r.Apps {
		points[i] = a.Embedding
	}
	proj, err := stats.PCA(points, min(2, len(points[0])))
	if err != nil {
		return err
	}
	r.Explained = proj.Explained
	for i := range r.Apps {
		r.Apps[i].PC = proj.Points[i]
	}
	return nil
}

// pairSet returns the embedding (A) and parameter (B) similarities of
// every two apps.
func (r *EmbeddingResult) pairSet() (stats.PairSet, error) {
	for _, a := range r.Apps {
		if n := norm(a.Embedding); n == 0 {
			return stats.PairSet{}, fmt.Errorf("app %s embeds to zeros: no cosine similarity", a.App)
		}
	}
	z := standardised(r.Apps)
	return stats.PairSet{
		A: pairs(len(r.Apps), func(i, j int) float64 { return cosine(r.Apps[i].Embedding, r.Apps[j].Embedding) }),
		B: pairs(len(z), func(i, j int) float64 {
			var s float64
			for k := range z[i] {
				s += (z[i][k] - z[j][k]) * (z[i][k] - z[j][k])
			}
			return -math.Sqrt(s)
		}),
	}, nil
}

// standardised returns the apps' Params, each column at mean 0 and
// standard deviation 1 (a column without spread stays at 0).
func standardised(apps []EmbeddedApp) [][]float64 {
	z := make([][]float64, len(apps))
	for i, a := range apps {
		z[i] = append([]float64(nil), a.Params...)
	}
	if len(z) == 0 {
		return z
	}
	for k := range z[0] {
		var m, ss float64
		for i := range z {
			m += z[i][k] / float64(len(z))
		}
		for i := range z {
			ss += (z[i][k] - m) * (z[i][k] - m)
		}
		sd := math.Sqrt(ss / float64(len(z)))
		for i := range z {
			if sd > 0 {
				z[i][k] = (z[i][k] - m) / sd
			} else {
				z[i][k] = 0
			}
		}
	}
	return z
}

func pairs(n int, f func(i, j int) float64) [][]float64 {
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, n)
		for j := range m[i] {
			if i != j {
				m[i][j] = f(i, j)
			}
		}
	}
	return m
}

func norm(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

// cosine is the cosine similarity of x and y, 0 when either is zero.
func cosine(x, y []float64) float64 {
	nx, ny := norm(x), norm(y)
	if nx == 0 || ny == 0 {
		return 0
	}
	var s float64
	for i := range x {
		s += x[i] * y[i]
	}
	return s / (nx * ny)
}

func columnMeans(rows [][]float64) []float64 {
	m := make([]float64, len(rows[0]))
	for _, r := range rows {
		for k, v := range r {
			m[k] += v / float64(len(rows))
		}
	}
	return m
}

// WriteTable prints one line per app, then the rank correlations.
func (r *EmbeddingResult) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "APP\tCLASS\tCPU/REQ\tMEM/REQ\tSTART-UP\tI/O SHARE\tREWARD\tPC1\tPC2\t\n")
	for _, a := range r.Apps {
		fmt.Fprintf(tw, "%s\t%s\t%.3fs\t%.1fMiB\t%s\t%.2f\t%.3f\t%+.3f\t%+.3f\t\n", a.App, a.Class, math.Exp(a.Params[0]), math.Exp(a.Params[1])/(1<<20),
			time.Duration(a.Params[2]*float64(time.Second)), a.Params[3], a.Reward, pc(a.PC, 0), pc(a.PC, 1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "Embedding cosine vs parameter similarity over %d apps: Spearman rho %s (bootstrap over apps); mean-state cosine instead: %.3f; per parameter: %s. PCs explain %s of the embedding variance.\n",
		len(r.Apps), r.Rho.Format("%.3f"), r.StateRho, paramRhos(r.ParamRho), percents(r.Explained)); err != nil {
		return err
	}
	if r.AuxRho == nil {
		return nil
	}
	_, err := fmt.Fprintf(w, "Auxiliary head, Spearman rho over the apps between each parameter and its prediction: %s.\n", paramRhos(r.AuxRho))
	return err
}

func pc(x []float64, i int) float64 {
	if i < len(x) {
		return x[i]
	}
	return 0
}

func paramRhos(rs []float64) string {
	s := ""
	for k, r := range rs {
		if k > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %.3f", HiddenParamNames[k], r)
	}
	return s
}

func percents(xs []float64) string {
	s := ""
	for k, x := range xs {
		if k > 0 {
			s += " + "
		}
		s += fmt.Sprintf("%.0f%%", 100*x)
	}
	return s
}

// WriteSVG plots the apps' embeddings on their first two principal
// components, coloured by the app's dominant segment class.
func (r *EmbeddingResult) WriteSVG(w io.Writer) error {
	if len(r.Apps) == 0 {
		return errors.New("embedding plot: no apps")
	}
	var groups []string
	for _, c := range sim.SegmentClasses() {
		groups = append(groups, string(c))
	}
	for _, a := range r.Apps {
		if a.Class == "" {
			groups = append(groups, "unknown")
			break
		}
	}
	s := chart.Scatter{
		Title:  fmt.Sprintf("Meta-PPO embeddings of %d held-out apps (seed %d), Spearman rho %s", len(r.Apps), r.Seed, r.Rho.Format("%.2f")),
		XLabel: fmt.Sprintf("principal component 1 (%s of the variance)", percents(r.Explained[:1])),
		YLabel: "principal component 2",
		Groups: groups,
	}
	if len(r.Explained) > 1 {
		s.YLabel = fmt.Sprintf("principal component 2 (%s of the variance)", percents(r.Explained[1:2]))
	}
	for _, a := range r.Apps {
		g := string(a.Class)
		if g == "" {
			g = "unknown"
		}
		s.Points = append(s.Points, chart.Point{X: pc(a.PC, 0), Y: pc(a.PC, 1), Group: g, Label: a.App})
	}
	return s.WriteSVG(w)
}

// EmbeddingStudy is the embedding experiment over seeds. Each seed has its
// own Meta-PPO, so pairs are only formed within a seed.
type EmbeddingStudy struct {
	Seeds   []uint64           `json:"seeds"`
	PerSeed []*EmbeddingResult `json:"perSeed"`
	// Rho is the mean over seeds of the per-seed ρ, with a bootstrap
	// interval resampling the apps within each seed; SeedRho is the
	// t-interval of the per-seed ρ with the seed as the unit (two seeds
	// or more).
	Rho     stats.Interval  `json:"rho"`
	SeedRho *stats.Interval `json:"seedRho,omitempty"`
	// StateRho, ParamRho and AuxRho average the seeds' (NaN entries left
	// out; AuxRho only when every seed's learner has a head).
	StateRho float64   `json:"stateRho"`
	ParamRho []float64 `json:"paramRho"`
	AuxRho   []float64 `json:"auxRho,omitempty"`
}

// StudyEmbedding summarises per-seed embedding results.
func StudyEmbedding(rs []*EmbeddingResult, seeds []uint64) (*EmbeddingStudy, error) {
	if len(rs) == 0 || len(rs) != len(seeds) {
		return nil, fmt.Errorf("embedding study: %d results for %d seeds", len(rs), len(seeds))
	}
	s := &EmbeddingStudy{Seeds: seeds, PerSeed: rs}
	var sets []stats.PairSet
	var rhos, state []float64
	param := make([][]float64, len(HiddenParamNames))
	aux := make([][]float64, len(HiddenParamNames))
	withHead := 0
	for _, r := range rs {
		if r.AuxRho != nil {
			withHead++
			for k, p := range r.AuxRho {
				if !math.IsNaN(p) {
					aux[k] = append(aux[k], p)
				}
			}
		}
		set, err := r.pairSet()
		if err != nil {
			return nil, fmt.Errorf("embedding study, seed %d: %w", r.Seed, err)
		}
		sets = append(sets, set)
		rhos = append(rhos, r.Rho.Mean)
		if !math.IsNaN(r.StateRho) {
			state = append(state, r.StateRho)
		}
		for k, p := range r.ParamRho {
			if !math.IsNaN(p) {
				param[k] = append(param[k], p)
			}
		}
	}
	var err error
	if s.Rho, err = stats.PairRankCorrelation(sets, 0.95, RankResamples, seeds[0]); err != nil {
		return nil, fmt.Errorf("embedding study: %w", err)
	}
	if len(rhos) > 1 {
		iv, err := stats.Mean(rhos, 0.95)
		if err != nil {
			return nil, fmt.Errorf("embedding study: %w", err)
		}
		s.SeedRho = &iv
	}
	s.StateRho = meanOrNaN(state)
	for _, p := range param {
		s.ParamRho = append(s.ParamRho, meanOrNaN(p))
	}
	if withHead == len(rs) {
		for _, p := range aux {
			s.AuxRho = append(s.AuxRho, meanOrNaN(p))
		}
	}
	return s, nil
}

func meanOrNaN(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return mean(xs)
}

// WriteTable prints the per-seed and pooled rank correlations.
func (s *EmbeddingStudy) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "SEED\tAPPS\tSPEARMAN RHO [95% CI]\tMEAN-STATE RHO\t")
	for _, n := range HiddenParamNames {
		fmt.Fprintf(tw, "RHO %s\t", n)
	}
	fmt.Fprintln(tw)
	for _, r := range s.PerSeed {
		fmt.Fprintf(tw, "%d\t%d\t%s\t%.3f\t", r.Seed, len(r.Apps), r.Rho.Format("%+.3f"), r.StateRho)
		for _, p := range r.ParamRho {
			fmt.Fprintf(tw, "%+.3f\t", p)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "all\t%d\t%s\t%.3f\t", s.Rho.N, s.Rho.Format("%+.3f"), s.StateRho)
	for _, p := range s.ParamRho {
		fmt.Fprintf(tw, "%+.3f\t", p)
	}
	fmt.Fprintln(tw)
	if err := tw.Flush(); err != nil {
		return err
	}
	seed := ""
	if s.SeedRho != nil {
		seed = fmt.Sprintf("; with the seed as the unit %s", s.SeedRho.Format("%+.3f"))
	}
	if s.AuxRho != nil {
		if _, err := fmt.Fprintf(w, "Auxiliary head, mean over seeds of Spearman rho between each parameter and its prediction on the held-out apps: %s.\n", paramRhos(s.AuxRho)); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "Spearman rho between embedding cosine similarity and hidden-parameter similarity (minus the distance of the standardised %s), pairs within a seed, mean over seeds %s (bootstrap over apps)%s. Goal: rho >= 0.6.\n",
		paramList(), s.Rho.Format("%+.3f"), seed)
	return err
}

func paramList() string {
	s := ""
	for k, n := range HiddenParamNames {
		if k > 0 {
			s += ", "
		}
		s += n
	}
	return s
}
