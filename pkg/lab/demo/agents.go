package demo

import (
	"context"
	"fmt"
	"io"
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

// agents trains the demo's agents (or loads them from o.Agent.Checkpoints)
// and returns their contenders; a trained agent's checkpoint and reward
// curve go into dir.
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
		c, l, fs, err := trainAgent(ctx, o, k, agentName(k, n), dir, stdout, stderr)
		if err != nil {
			return nil, nil, err
		}
		cs, ls, files = append(cs, c), append(ls, l), append(files, fs...)
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

// trainAgent trains agent k of the demo, named name.
func trainAgent(ctx context.Context, o Options, k int, name, dir string, stdout, stderr io.Writer) (eval.Contender, train.Learner, []string, error) {
	t := o.trainOptions(k)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return eval.Contender{}, nil, nil, err
	}
	file := func(base string) string {
		if name == train.PolicyName {
			return filepath.Join(dir, base)
		}
		ext := filepath.Ext(base)
		return filepath.Join(dir, strings.TrimSuffix(base, ext)+"-"+strconv.Itoa(k+1)+ext)
	}
	t.Checkpoint = file(AgentCheckpointFile)
	if err := o.Agent.Validation.Apply(&t); err != nil {
		return eval.Contender{}, nil, nil, err
	}
	if o.Progress {
		t.Progress = NewProgressBar(stderr)
	}
	cpu0, wall0 := CPUTime(), time.Now()
	res, err := train.Train(ctx, t)
	if err != nil {
		return eval.Contender{}, nil, nil, err
	}
	cpu, wall := CPUTime()-cpu0, time.Since(wall0)
	curve := file(RewardCurveFile)
	f, err := os.Create(curve)
	if err != nil {
		return eval.Contender{}, nil, nil, err
	}
	err = train.WriteCurveSVG(f, res.Episodes, t.BatchEpisodes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return eval.Contender{}, nil, nil, fmt.Errorf("writing %s: %w", curve, err)
	}
	boots, bootEnd := res.BootstrapCount()
	kk := min(t.BatchEpisodes, len(res.Episodes)-bootEnd)
	fmt.Fprintf(stdout, "Agent %q (%s actions, training seed %d): trained on %d training apps (none held out) for %d episodes (%d bootstrapping) of %d windows in %s (%.0f s CPU, %.0f windows/s).\n",
		name, t.Space(), t.Seed, t.Apps, t.Episodes, boots, t.EpisodeSteps, wall.Round(time.Second), cpu.Seconds(),
		float64(t.Episodes*t.EpisodeSteps)/max(wall.Seconds(), 1e-9))
	if kk > 0 {
		last := len(res.Episodes) - kk
		fmt.Fprintf(stdout, "  episode reward: default %.3f while bootstrapping; agent %.3f in its first %d episodes, %.3f in its last %d (the learner was also charged %.4f per window for changes and SLO violations)\n",
			res.MeanReward(0, bootEnd), res.MeanReward(bootEnd, bootEnd+kk), kk,
			res.MeanReward(last, len(res.Episodes)), kk, res.MeanShaping(last, len(res.Episodes)))
	}
	if res.Selected >= 0 {
		v := res.Validations[res.Selected]
		fmt.Fprintf(stdout, "  validation: the snapshot after %d of %d updates was selected of %d judged, %s\n", v.Update, res.Validations[len(res.Validations)-1].Update, len(res.Validations), v.Summary)
	} else if len(res.Validations) > 0 {
		fmt.Fprintf(stdout, "  validation: none of %d snapshots was accepted; the agent has the last weights\n", len(res.Validations))
	}
	c := train.Contender(res.Learner, train.AgentOptions{})
	c.Name = name
	return c, res.Learner, []string{t.Checkpoint, curve}, nil
}
