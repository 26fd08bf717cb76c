package demo

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aware-k8s/aware/pkg/lab/eval"
	"github.com/aware-k8s/aware/pkg/lab/train"
)

// AgentOptions say where the demo's agent comes from.
type AgentOptions struct {
	// Checkpoints, when set, load trained agents (train.WriteCheckpoint)
	// instead of training them, one row each.
	Checkpoints []string
	// Seeds is how many agents are trained, with training seeds Seed,
	// Seed+1, ...; 0 means 1. Several agents are judged together too
	// (eval.Report.Pool), so that the comparison spans the training seed.
	Seeds int
	// Quorums, with several agents, add one row per quorum q: the agents
	// as one ensemble (train.Ensemble) that deviates from the default in a
	// dimension only as far as at least q of them deviate the same way
	// (0: all of them).
	Quorums []int
	// Train is the training run otherwise; its Seed, Step, Resize and
	// Traces are the demo's, and its checkpoint goes into the output folder.
	Train train.Options
	// Validation, with Apps > 0, selects each trained agent's snapshot on
	// validation apps (ValidationOptions.Apply).
	Validation ValidationOptions
	// Fresh trains every agent, even one shipped with the demo that was
	// trained with the same options (shippedAgent).
	Fresh bool
	// Shipped holds the agents shipped with the demo (WriteAgents wrote
	// them); nil means ShippedAgents.
	Shipped fs.FS `json:"-"`
}

// DefaultQuorums are the ensembles the demo and eval judge when there are
// several agents: all of them must agree.
func DefaultQuorums() []int { return []int{0} }

// SingleAgentQuorums returns q, or none when there is one agent and q is
// the default: the default ensemble is for several agents, and a user who
// asks for one agent did not ask for it.
func (a *AgentOptions) SingleAgentQuorums(q []int) []int {
	if a.count() < 2 && slices.Equal(q, DefaultQuorums()) {
		return nil
	}
	return q
}

// count is the number of agents.
func (a *AgentOptions) count() int {
	if len(a.Checkpoints) > 0 {
		return len(a.Checkpoints)
	}
	return max(a.Seeds, 1)
}

// agentName is the row of agent i of n: "aware" alone, else "aware-<i+1>".
func agentName(i, n int) string {
	if n == 1 {
		return train.PolicyName
	}
	return fmt.Sprintf("%s-%d", train.PolicyName, i+1)
}

// PooledName is the comparison row of several agents judged together.
const PooledName = train.PolicyName + " (pooled)"

// EnsembleName is the row of the agents as one ensemble of quorum q.
func EnsembleName(q, n int) string {
	return fmt.Sprintf("%s (%d of %d agree)", train.PolicyName, q, n)
}

// DefaultAgentSeeds is how many agents the demo trains: one result of
// training is one draw, and the comparison must span the training seed.
const DefaultAgentSeeds = 3

// Files the demo writes besides the evaluator's when it trains the agent.
const (
	AgentCheckpointFile = "agent.ckpt"
	RewardCurveFile     = "reward-curve.svg"
)

// trainOptions are agent k's training options with the demo's seed (plus
// k), window, resize mode, tenants and trace kinds.
func (o *Options) trainOptions(k int) train.Options {
	t := o.Agent.Train
	t.Seed, t.Step, t.Resize, t.Tenants = o.Seed+uint64(k), o.Step, o.Resize, o.Tenants
	t.Traces = slices.Clone(o.Traces)
	t.Azure, t.AzureRate, t.Series = o.Azure, o.AzureRate, o.Series
	return t
}

// agents returns the contenders of the demo's agents: loaded from
// o.Agent.Checkpoints, or each taken from the shipped agents when one was
// trained with its options (shippedAgent) and trained otherwise. Their
// checkpoints, and the reward curves of those trained, go into dir.
func agents(ctx context.Context, o Options, dir string, stdout, stderr io.Writer) ([]eval.Contender, []string, error) {
	if len(o.Agent.Checkpoints) > 0 {
		cs, err := CheckpointContenders(o.Agent.Checkpoints, o.Agent.Quorums, stdout)
		return cs, nil, err
	}
	n := o.Agent.count()
	var cs []eval.Contender
	var files []string
	var ls []train.Learner
	for k := range n {
		name := agentName(k, n)
		if !o.Agent.Fresh {
			c, l, more, ok, err := shippedAgent(o, k, name, dir, stdout)
			if err != nil {
				return nil, nil, err
			}
			if ok {
				cs, ls, files = append(cs, c), append(ls, l), append(files, more...)
				continue
			}
		}
		tr, err := trainAgent(ctx, o, k, name, dir, true, stdout, stderr)
		if err != nil {
			return nil, nil, err
		}
		cs, ls, files = append(cs, tr.contender), append(ls, tr.learner), append(files, tr.files...)
	}
	cs, err := ensembles(cs, ls, o.Agent.Quorums)
	fmt.Fprintln(stdout)
	return cs, files, err
}

// CheckpointContenders loads the trained agents of paths
// (train.WriteCheckpoint), one contender each, named as the demo names
// them ("aware", or "aware-<i>" among several), then one ensemble per
// quorum (EnsembleName). The what-if's agent replay uses it too.
func CheckpointContenders(paths []string, quorums []int, stdout io.Writer) ([]eval.Contender, error) {
	var cs []eval.Contender
	var ls []train.Learner
	for k, path := range paths {
		name := agentName(k, len(paths))
		l, err := train.LoadCheckpoint(path)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(stdout, "Agent %q: loaded from %s\n", name, path)
		c := train.Contender(l, train.AgentOptions{})
		c.Name = name
		cs, ls = append(cs, c), append(ls, l)
	}
	cs, err := ensembles(cs, ls, quorums)
	fmt.Fprintln(stdout)
	return cs, err
}

// ensembles appends to cs one ensemble of ls per quorum.
func ensembles(cs []eval.Contender, ls []train.Learner, quorums []int) ([]eval.Contender, error) {
	for _, q := range quorums {
		ens, err := train.NewEnsemble(ls, q)
		if err != nil {
			return nil, err
		}
		c := train.Contender(ens, train.AgentOptions{})
		c.Name = EnsembleName(ens.Quorum(), len(ls))
		cs = append(cs, c)
	}
	return cs, nil
}

// trainedAgent is what trainAgent made of one agent.
type trainedAgent struct {
	contender eval.Contender
	learner   train.Learner
	// checkpoint is its file; files are those written (the checkpoint,
	// then the reward curve if any).
	checkpoint string
	files      []string
	// summary and details are what is printed of the training, without
	// its times: the same for every run of the same options and code.
	summary string
	details []string
}

// agentFile is the file of agent k, named name, in dir: base alone,
// base-<k+1> among several.
func agentFile(dir, name string, k int, base string) string {
	if name == train.PolicyName {
		return filepath.Join(dir, base)
	}
	ext := filepath.Ext(base)
	return filepath.Join(dir, strings.TrimSuffix(base, ext)+"-"+strconv.Itoa(k+1)+ext)
}

// trainAgent trains agent k of the demo, named name, into dir, with its
// reward curve when curve is set, and prints what came of it.
func trainAgent(ctx context.Context, o Options, k int, name, dir string, curve bool, stdout, stderr io.Writer) (trainedAgent, error) {
	t := o.trainOptions(k)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return trainedAgent{}, err
	}
	t.Checkpoint = agentFile(dir, name, k, AgentCheckpointFile)
	if err := o.Agent.Validation.Apply(&t); err != nil {
		return trainedAgent{}, err
	}
	if o.Progress {
		t.Progress = NewProgressBar(stderr)
	}
	cpu0, wall0 := CPUTime(), time.Now()
	res, err := train.Train(ctx, t)
	if err != nil {
		return trainedAgent{}, err
	}
	cpu, wall := CPUTime()-cpu0, time.Since(wall0)
	files := []string{t.Checkpoint}
	if curve {
		path := agentFile(dir, name, k, RewardCurveFile)
		f, err := os.Create(path)
		if err != nil {
			return trainedAgent{}, err
		}
		err = train.WriteCurveSVG(f, res.Episodes, t.BatchEpisodes)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return trainedAgent{}, fmt.Errorf("writing %s: %w", path, err)
		}
		files = append(files, path)
	}
	summary, details := agentSummary(t, res)
	fmt.Fprintf(stdout, "Agent %q %s in %s (%.0f s CPU, %.0f windows/s).\n",
		name, summary, wall.Round(time.Second), cpu.Seconds(), float64(t.Episodes*t.EpisodeSteps)/max(wall.Seconds(), 1e-9))
	for _, d := range details {
		fmt.Fprintf(stdout, "  %s\n", d)
	}
	c := train.Contender(res.Learner, train.AgentOptions{})
	c.Name = name
	return trainedAgent{contender: c, learner: res.Learner, checkpoint: t.Checkpoint, files: files, summary: summary, details: details}, nil
}

// agentSummary says how an agent was trained and what came of it: the
// training, its episodes' rewards and the snapshot validation selected.
func agentSummary(t train.Options, res *train.Result) (summary string, details []string) {
	boots, bootEnd := res.BootstrapCount()
	summary = fmt.Sprintf("(%s actions, training seed %d): trained on %d training apps (none held out) for %d episodes (%d bootstrapping) of %d windows",
		t.Space(), t.Seed, t.Apps, t.Episodes, boots, t.EpisodeSteps)
	if kk := min(t.BatchEpisodes, len(res.Episodes)-bootEnd); kk > 0 {
		last := len(res.Episodes) - kk
		details = append(details, fmt.Sprintf("episode reward: default %.3f while bootstrapping; agent %.3f in its first %d episodes, %.3f in its last %d (the learner was also charged %.4f per window for changes and SLO violations)",
			res.MeanReward(0, bootEnd), res.MeanReward(bootEnd, bootEnd+kk), kk,
			res.MeanReward(last, len(res.Episodes)), kk, res.MeanShaping(last, len(res.Episodes))))
	}
	if res.Selected >= 0 {
		v := res.Validations[res.Selected]
		details = append(details, fmt.Sprintf("validation: the snapshot after %d of %d updates was selected of %d judged, %s", v.Update, res.Validations[len(res.Validations)-1].Update, len(res.Validations), v.Summary))
	} else if len(res.Validations) > 0 {
		details = append(details, fmt.Sprintf("validation: none of %d snapshots was accepted; the agent has the last weights", len(res.Validations)))
	}
	return summary, details
}
