//go:build benchreal

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
	"github.com/aware-k8s/aware/hack/benchreal/agent"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

const (
	rlAgentDeployment = "aware-rl-agent"
	// ensembleMount is where the members are mounted in the rl-agent's
	// container (deploy/components/rl-agent-ensemble's path).
	ensembleMount  = "/etc/aware/ensemble"
	ensembleVolume = "ensemble"
)

// ensembleMembers returns the ensemble's checkpoints, trained with
// rl-agent train (agent.TrainArgs, seeds agent.Seeds) or found in the
// cache (--agent-cache/KEY, agent.CacheKey), copied into the node's
// directory for the container to read.
func (h *harness) ensembleMembers(ctx context.Context) (string, error) {
	commit, err := gitOut(ctx, h.o.bin.repo, append([]string{"log", "-1", "--format=%H", "--"}, agent.TrainingPaths...)...)
	if err != nil {
		return "", err
	}
	diff, err := gitOut(ctx, h.o.bin.repo, append([]string{"diff", "HEAD", "--"}, agent.TrainingPaths...)...)
	if err != nil {
		return "", err
	}
	cache := filepath.Join(h.o.bin.agentCache, agent.CacheKey(strings.TrimSpace(commit), diff))
	var missing []uint64
	for _, s := range agent.Seeds {
		if _, err := os.Stat(filepath.Join(cache, fmt.Sprintf("seed%d.ckpt", s))); err != nil {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		if h.o.bin.rlAgent == "" {
			return "", fmt.Errorf("the ensemble's members are not in %s and --rl-agent is not set to train them", cache)
		}
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return "", err
		}
		for _, s := range missing {
			ckpt := filepath.Join(cache, fmt.Sprintf("seed%d.ckpt", s))
			start := time.Now()
			cmd := exec.CommandContext(ctx, h.o.bin.rlAgent, agent.TrainArgs(s, ckpt)...)
			log, err := os.Create(filepath.Join(h.logDir, fmt.Sprintf("train-seed%d.log", s)))
			if err != nil {
				return "", err
			}
			cmd.Stdout, cmd.Stderr = log, log
			err = cmd.Run()
			log.Close()
			if err != nil {
				return "", fmt.Errorf("rl-agent train seed %d: %w (log %s)", s, err, log.Name())
			}
			logf("trained the ensemble's member of seed %d in %s (%s)", s, time.Since(start).Round(time.Second), ckpt)
		}
	} else {
		logf("the ensemble's members are cached in %s", cache)
	}
	dst := filepath.Join(h.env.NodeDir, "ensemble")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	for _, s := range agent.Seeds {
		name := fmt.Sprintf("seed%d.ckpt", s)
		b, err := os.ReadFile(filepath.Join(cache, name))
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dst, name), b, 0o644); err != nil {
			return "", err
		}
	}
	return dst, nil
}

func gitOut(ctx context.Context, repo string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// prepareAgent starts the rl-agent afresh for policy: it stops the pod,
// empties its state directory (a learner keeps nothing from an earlier
// run, and an ensemble refuses a learner's state), sets its arguments
// (agent.ServeArgs) and the members' volume, and starts it again.
func (h *harness) prepareAgent(ctx context.Context, policy string) error {
	if err := h.scale(ctx, rlAgentDeployment, 0, nil); err != nil {
		return err
	}
	c := h.tb.Client.AppsV1().Deployments(nodeinstall.Namespace)
	sel := "app.kubernetes.io/name=" + rlAgentDeployment
	state := filepath.Join(h.env.NodeDir, "pv", "aware-rl-agent-state")
	entries, err := os.ReadDir(state)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(state, e.Name())); err != nil {
			return err
		}
	}
	var members []string
	if policy == agent.Ensemble {
		for _, s := range agent.Seeds {
			members = append(members, fmt.Sprintf("%s/seed%d.ckpt", ensembleMount, s))
		}
	}
	var args []string
	// The deployment controller writes the status in between: read again
	// on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Get(ctx, rlAgentDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ps := &d.Spec.Template.Spec
		ctr := &ps.Containers[0]
		if ctr.Args, err = agent.ServeArgs(ctr.Args, policy, members); err != nil {
			return err
		}
		args = ctr.Args
		ps.Volumes = slices.DeleteFunc(ps.Volumes, func(v corev1.Volume) bool { return v.Name == ensembleVolume })
		ctr.VolumeMounts = slices.DeleteFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == ensembleVolume })
		if policy == agent.Ensemble {
			dir := corev1.HostPathDirectory
			ps.Volumes = append(ps.Volumes, corev1.Volume{Name: ensembleVolume,
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: h.ensembleDir, Type: &dir}}})
			ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: ensembleVolume, MountPath: ensembleMount, ReadOnly: true})
		}
		one := int32(1)
		d.Spec.Replicas = &one
		_, err = c.Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	var last string
	if err := framework.WaitFor(ctx, 3*time.Minute, 2*time.Second, "the rl-agent ready for "+policy, func(ctx context.Context) (bool, error) {
		pods, err := h.tb.Client.CoreV1().Pods(nodeinstall.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		last = nodeinstall.DescribePods(pods.Items)
		return nodeinstall.ReadyOn(pods.Items, rlAgentDeployment, h.env.Node), nil
	}); err != nil {
		return fmt.Errorf("%w; pods: %s", err, last)
	}
	logf("the rl-agent serves afresh for %s (args %s)", policy, strings.Join(args, " "))
	return nil
}
