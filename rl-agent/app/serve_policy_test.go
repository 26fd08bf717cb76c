package app

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/lab/train"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

func TestInitialPolicy(t *testing.T) {
	o := train.DefaultOptions()
	o.Policy = train.PolicyMetaPPO
	meta, err := train.NewLearner(o)
	if err != nil {
		t.Fatal(err)
	}
	ddpg, err := nn.NewDDPG(nn.DefaultDDPGConfig(learn.StateDim, 2))
	if err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a checkpoint"), 0o644); err != nil {
		t.Fatal(err)
	}
	defaults := nn.DefaultMetaConfig(learn.StateDim, int(learn.NumActions))
	trainedPPO := writePolicy(t, smallPPO(t, learn.StateDim))
	trainedMeta := writePolicy(t, meta)
	ro := train.DefaultOptions()
	ro.ActionSpace, ro.Hidden = train.ActionSpaceResidual, []int{8}
	residualLearner, err := train.NewLearner(ro)
	if err != nil {
		t.Fatal(err)
	}
	trainedResidual := writePolicy(t, residualLearner)
	ro.Policy, ro.Window = train.PolicyMetaPPO, 4
	residualMeta, err := train.NewLearner(ro)
	if err != nil {
		t.Fatal(err)
	}
	trainedResidualMeta := writePolicy(t, residualMeta)
	for _, tc := range []struct {
		name, path, policy string
		hidden             []int
		window             int // 0: PPO
		err                string
		space              string // --action-space, and the shape served
	}{
		{"none: random PPO", "", "", defaults.Hidden, 0, "", ""},
		{"none, --policy=ppo: random PPO", "", nn.KindPPO, defaults.Hidden, 0, "", ""},
		{"none, --policy=meta-ppo: random Meta-PPO", "", nn.KindMetaPPO, defaults.Hidden, defaults.Window, "", ""},
		{"trained PPO", trainedPPO, "", []int{8}, 0, "", ""},
		{"trained PPO, --policy=ppo", trainedPPO, nn.KindPPO, []int{8}, 0, "", ""},
		{"trained PPO, --policy=meta-ppo", trainedPPO, nn.KindMetaPPO, nil, 0, `holds a "ppo" policy, --policy is "meta-ppo"`, ""},
		{"trained meta-ppo", trainedMeta, "", o.Hidden, o.Window, "", ""},
		{"trained meta-ppo, --policy=meta-ppo", trainedMeta, nn.KindMetaPPO, o.Hidden, o.Window, "", ""},
		{"trained meta-ppo, --policy=ppo", trainedMeta, nn.KindPPO, nil, 0, `holds a "meta-ppo" policy, --policy is "ppo"`, ""},
		{"small meta-ppo", writePolicy(t, smallMeta(t, learn.StateDim, 5)), "", []int{8}, 5, "", ""},
		{"missing file", filepath.Join(t.TempDir(), "missing"), "", nil, 0, "no such file", ""},
		{"garbage", garbage, "", nil, 0, "--initial-checkpoint", ""},
		{"ddpg", writePolicy(t, ddpg), "", nil, 0, `holds a "ddpg" policy; serve runs "ppo" and "meta-ppo" policies`, ""},
		{"PPO with other features", writePolicy(t, smallPPO(t, learn.StateDim+1)), "", nil, 0, "incompatible", ""},
		{"meta-ppo with other features", writePolicy(t, smallMeta(t, learn.StateDim+1, 4)), "", nil, 0, "incompatible", ""},
		{"none, --action-space=residual: random residual PPO", "", "", defaults.Hidden, 0, "", "residual"},
		{"trained residual", trainedResidual, "", []int{8}, 0, "", ""},
		{"trained residual, --action-space=residual", trainedResidual, "", []int{8}, 0, "", "residual"},
		{"trained residual, --action-space=paper", trainedResidual, "", nil, 0, `acts in the residual action space, --action-space is "paper"`, "paper"},
		{"trained PPO, --action-space=residual", trainedPPO, "", nil, 0, `acts in the paper action space, --action-space is "residual"`, "residual"},
		{"none, --policy=meta-ppo --action-space=residual: random residual Meta-PPO", "", nn.KindMetaPPO, defaults.Hidden, defaults.Window, "", "residual"},
		{"trained residual meta-ppo", trainedResidualMeta, "", []int{8}, 4, "", ""},
		{"trained residual meta-ppo, --action-space=residual", trainedResidualMeta, nn.KindMetaPPO, []int{8}, 4, "", "residual"},
		{"trained residual meta-ppo, --action-space=paper", trainedResidualMeta, "", nil, 0, `acts in the residual action space, --action-space is "paper"`, "paper"},
		{"trained meta-ppo, --action-space=residual", trainedMeta, "", nil, 0, `acts in the paper action space, --action-space is "residual"`, "residual"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, m, err := initialPolicy(&serveOptions{InitialCheckpoint: tc.path, Policy: tc.policy, Seed: 1, ActionSpace: tc.space})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (p == nil) == (m == nil) {
				t.Fatalf("got PPO %v and Meta-PPO %v, want exactly one", p != nil, m != nil)
			}
			var hidden []int
			window := 0
			if m != nil {
				hidden, window = m.Config().Hidden, m.Config().Window
			} else {
				hidden = p.Config().Hidden
			}
			if !slices.Equal(hidden, tc.hidden) || window != tc.window {
				t.Fatalf("hidden %v window %d, want %v and %d", hidden, window, tc.hidden, tc.window)
			}
			c := nn.Config{}
			if m != nil {
				c = m.Config().Config
			} else {
				c = p.Config()
			}
			sh, err := learn.ShapeOf(c)
			if err != nil {
				t.Fatal(err)
			}
			wantResidual := tc.space == "residual" || tc.path == trainedResidual || tc.path == trainedResidualMeta ||
				(tc.space == "" && tc.path == "" && tc.policy != nn.KindMetaPPO)
			if (sh.Residual != nil) != wantResidual {
				t.Fatalf("serving shape %v, want residual: %v", sh, wantResidual)
			}
		})
	}
	// `rl-agent train --meta-signature`: the served Meta-PPO reads the
	// workload's signature, and the agent answers with it.
	t.Run("trained residual meta-ppo reading signatures", func(t *testing.T) {
		ro.MetaSignature = true
		l, err := train.NewLearner(ro)
		if err != nil {
			t.Fatal(err)
		}
		ckpt := writePolicy(t, l)
		_, m, err := initialPolicy(&serveOptions{InitialCheckpoint: ckpt, Seed: 1})
		if err != nil || m == nil || m.Config().SignatureDim != learn.SignatureDim {
			t.Fatalf("got %v, %v; want a Meta-PPO reading %d signature values", m, err, learn.SignatureDim)
		}
		// A fresh one with --meta-signature, and without it.
		for _, on := range []bool{true, false} {
			_, m, err := initialPolicy(&serveOptions{Policy: nn.KindMetaPPO, MetaSignature: on, Seed: 1})
			if want := map[bool]int{true: learn.SignatureDim}[on]; err != nil || m == nil || m.Config().SignatureDim != want {
				t.Fatalf("--meta-signature=%t: got %v, %v; want a Meta-PPO reading %d signature values", on, m, err, want)
			}
		}
		_, stop, conn := startServe(t, t.TempDir(), "--initial-checkpoint", ckpt)
		defer func() {
			if err := stop(); err != nil {
				t.Errorf("serve returned %v", err)
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := pb.NewAgentServiceClient(conn).Recommend(ctx, request()); err != nil {
			t.Fatal(err)
		}
	})
}

// The agent starts from a trained policy, persists it as its own state, and
// refuses (without touching the state) to restart with a policy of another
// architecture.
func TestServeFromInitialCheckpoint(t *testing.T) {
	dir := t.TempDir()
	ckpt := writePolicy(t, smallPPO(t, learn.StateDim))
	base, stop, conn := startServe(t, dir, "--initial-checkpoint", ckpt)
	args := append(slices.Clone(base), "--initial-checkpoint", ckpt)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := pb.NewAgentServiceClient(conn).Recommend(ctx, request()); err != nil {
		t.Fatal(err)
	}
	state := stopForState(t, stop, dir)

	// Without the flag the default architecture cannot take the state.
	refusedStart(callCtx(t), t, dir, state, args[:len(args)-2]...)

	stop = runCommand(t, args...)
	waitServing(t, conn)
	if _, err := pb.NewAgentServiceClient(conn).GetPolicyStatus(callCtx(t), &pb.GetPolicyStatusRequest{Workload: request().Workload}); err != nil {
		t.Fatalf("after restart with the flag: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServeFromMetaCheckpoint: the agent serves a Meta-PPO policy from
// --initial-checkpoint (Recommend, GetPolicyStatus), persists it as its
// own state, refuses without touching that state to restart with the
// default PPO policy, a PPO checkpoint or a Meta-PPO of another
// architecture, and restarts with the flag. A Meta-PPO pre-trained with
// an auxiliary head (--meta-aux-weight) is served the same way: the head
// only shaped the embedding; serving acts without it and, with no
// hidden parameters to learn from, never trains it.
func TestServeFromMetaCheckpoint(t *testing.T) {
	for _, auxDim := range []int{0, 4} {
		t.Run(fmt.Sprintf("auxDim=%d", auxDim), func(t *testing.T) { testServeFromMetaCheckpoint(t, auxDim) })
	}
}

func testServeFromMetaCheckpoint(t *testing.T, auxDim int) {
	dir := t.TempDir()
	ckpt := writePolicy(t, smallMetaAux(t, learn.StateDim, 4, auxDim))
	base, stop, conn := startServe(t, dir, "--initial-checkpoint", ckpt)
	args := append(slices.Clone(base), "--initial-checkpoint", ckpt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := pb.NewAgentServiceClient(conn)
	r, err := c.Recommend(ctx, request())
	if err != nil {
		t.Fatal(err)
	}
	if r.Stage != pb.Stage_STAGE_BOOTSTRAPPING || r.Source != pb.Source_SOURCE_DEFAULT {
		t.Errorf("first response %v", r)
	}
	if _, err := c.ReportOutcome(ctx, &pb.ReportOutcomeRequest{
		Workload: request().Workload, Observation: request().Observation, Applied: request().DefaultRecommendation,
		AppliedSource: pb.Source_SOURCE_DEFAULT, NextObservation: nextObservation(), Config: request().Config,
	}); err != nil {
		t.Fatal(err)
	}
	st, err := c.GetPolicyStatus(ctx, &pb.GetPolicyStatusRequest{Workload: request().Workload})
	if err != nil || st.Status.Transitions != 1 {
		t.Fatalf("status %v, %v", st, err)
	}
	state := stopForState(t, stop, dir)
	if !bytes.Contains(state, []byte(`"policy":`)) {
		t.Fatalf("checkpoint without a policy: %.200s", state)
	}

	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default PPO policy", base},
		{"PPO checkpoint", append(slices.Clone(base), "--initial-checkpoint", writePolicy(t, smallPPO(t, learn.StateDim)))},
		{"Meta-PPO of another window", append(slices.Clone(base), "--initial-checkpoint", writePolicy(t, smallMeta(t, learn.StateDim, 8)))},
		{"Meta-PPO with another auxiliary head", append(slices.Clone(base), "--initial-checkpoint", writePolicy(t, smallMetaAux(t, learn.StateDim, 4, 4-auxDim)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedStart(callCtx(t), t, dir, state, tc.args...)
		})
	}

	stop = runCommand(t, args...)
	waitServing(t, conn)
	ctx = callCtx(t)
	st, err = c.GetPolicyStatus(ctx, &pb.GetPolicyStatusRequest{Workload: request().Workload})
	if err != nil || st.Status.Transitions != 1 {
		t.Fatalf("after restart with the flag: %v, %v", st, err)
	}
	if _, err := c.Recommend(ctx, request()); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServeFreshMetaPPO: --policy=meta-ppo without a checkpoint serves a
// random Meta-PPO policy, persists it, and the state then refuses a start
// as the default PPO but takes a restart with the same flag.
func TestServeFreshMetaPPO(t *testing.T) {
	dir := t.TempDir()
	base, stop, conn := startServe(t, dir, "--policy", "meta-ppo")
	args := append(slices.Clone(base), "--policy", "meta-ppo")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := pb.NewAgentServiceClient(conn)
	if _, err := c.Recommend(ctx, request()); err != nil {
		t.Fatal(err)
	}
	state := stopForState(t, stop, dir)
	refusedStart(callCtx(t), t, dir, state, base...)
	refusedStart(callCtx(t), t, dir, state, append(slices.Clone(base), "--policy", "ppo")...)

	stop = runCommand(t, args...)
	waitServing(t, conn)
	if _, err := c.Recommend(callCtx(t), request()); err != nil {
		t.Fatalf("after restart with the flag: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
