//go:build benchreal

package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/e2e/nodeinstall"
	"github.com/aware-k8s/aware/hack/benchreal/simside"
	"github.com/aware-k8s/aware/pkg/core/fusion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// variantOf is the --default-variant the recommender and the updater run
// with for policy: the SPEC of "fused:SPEC", else "" (the fused default,
// which the agents act beside).
func variantOf(policy string) string {
	spec, _ := strings.CutPrefix(policy, simside.FusedPrefix)
	if spec == policy {
		return ""
	}
	return spec
}

// validPolicy reports whether the harness can run policy.
func validPolicy(policy string) error {
	if slices.Contains(Policies, policy) {
		return nil
	}
	if spec := variantOf(policy); spec != "" {
		if _, err := fusion.ParseVariant(spec); err != nil {
			return fmt.Errorf("--policies %q: %w", policy, err)
		}
		return nil
	}
	return fmt.Errorf("--policies: unknown policy %q (want some of %s, or fused:SPEC with SPEC a variant of the fused default: %s)", policy, strings.Join(Policies, ", "), fusion.VariantHelp)
}

var notName = regexp.MustCompile(`[^a-z0-9]+`)

// policySlug spells policy for names a policy's spec cannot be part of
// (namespaces, files): "hpa+vpa" is "hpa-vpa", "fused:target=0.7/floor=usage"
// is "fused-target-0-7-floor-usage".
func policySlug(policy string) string {
	return strings.Trim(notName.ReplaceAllString(strings.ToLower(policy), "-"), "-")
}

// variantFlag is the components' flag that names the default's variant.
const variantFlag = "--default-variant"

// withVariant returns args with variantFlag set to spec, or without it for
// the fused default.
func withVariant(args []string, spec string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == variantFlag:
			i++ // its value is the next argument
		case strings.HasPrefix(args[i], variantFlag+"="):
		default:
			out = append(out, args[i])
		}
	}
	if spec != "" {
		out = append(out, variantFlag+"="+spec)
	}
	return out
}

// variantComponents compute (the recommender) or enforce (the updater's
// scale-up rate) the default's variant.
var variantComponents = []string{"aware-recommender", "aware-updater"}

// setVariant makes the recommender and the updater run the default's
// variant spec, restarting each whose arguments change (stopped first: in
// the host's network the new pod needs the old one's ports).
func (h *harness) setVariant(ctx context.Context, spec string) error {
	c := h.tb.Client.AppsV1().Deployments(nodeinstall.Namespace)
	for _, name := range variantComponents {
		d, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		args := d.Spec.Template.Spec.Containers[0].Args
		want := withVariant(args, spec)
		if slices.Equal(args, want) {
			continue
		}
		if err := h.scale(ctx, name, 0, nil); err != nil {
			return err
		}
		if err := h.scale(ctx, name, 1, func(args []string) []string { return withVariant(args, spec) }); err != nil {
			return err
		}
		logf("%s runs with %s=%q", name, variantFlag, spec)
	}
	return nil
}

// scale sets the replicas of the component's Deployment (and, when edit is
// set, its container's arguments) and waits until that many of its pods
// are Ready on the node, or none is left.
func (h *harness) scale(ctx context.Context, name string, replicas int32, edit func([]string) []string) error {
	c := h.tb.Client.AppsV1().Deployments(nodeinstall.Namespace)
	// The deployment controller writes the status in between: read again
	// on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = &replicas
		if edit != nil {
			ctr := &d.Spec.Template.Spec.Containers[0]
			ctr.Args = edit(ctr.Args)
		}
		_, err = c.Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	sel := "app.kubernetes.io/name=" + name
	var last string
	if err := framework.WaitFor(ctx, 3*time.Minute, 2*time.Second, fmt.Sprintf("%s at %d", name, replicas), func(ctx context.Context) (bool, error) {
		pods, err := h.tb.Client.CoreV1().Pods(nodeinstall.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		last = nodeinstall.DescribePods(pods.Items)
		if replicas == 0 {
			return len(pods.Items) == 0, nil
		}
		return len(pods.Items) == int(replicas) && nodeinstall.ReadyOn(pods.Items, name, h.env.Node), nil
	}); err != nil {
		return fmt.Errorf("%w; pods: %s", err, last)
	}
	return nil
}
