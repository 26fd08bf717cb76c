// Package app wires the updater binary: its cobra command, options and
// run loop.
package app

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mpainformers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/pkg/kube/leader"
	"github.com/aware-k8s/aware/pkg/kube/podindex"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/updater/controller"
)

// NewCommand returns the updater root command.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	logging := cli.NewLogging()
	cmd := &cobra.Command{
		Use:   "updater",
		Short: "Applies MultidimPodAutoscaler recommendations to running workloads",
		Long: `The updater applies horizontal changes through the target's scale
subresource and vertical changes by in-place resize or eviction, within the
constraints, rate limits and disruption budgets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return err
			}
			return run(cmd.Context(), opts)
		},
	}
	cli.Prepare(cmd)
	opts.AddFlags(cmd.Flags())
	logging.Install(cmd)
	return cmd
}

// trimPod drops managedFields from cached pods: they are the largest part
// of a pod object and the updater never reads them. The rest of the pod is
// kept because an in-place resize sends the cached pod back.
func trimPod(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		p.ManagedFields = nil
	}
	return obj, nil
}

func run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx).WithName("updater")
	ctx = klog.NewContext(ctx, logger)

	clients, err := apiclient.NewClients(o.Kube, "aware-updater")
	if err != nil {
		return err
	}
	kubeClient, mpaClient, resolver := clients.Kube, clients.MPA, clients.Targets

	reg := serve.NewRegistry()
	metrics, err := controller.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	endpoints := serve.New(reg)

	mpaInf := mpainformers.NewSharedInformerFactoryWithOptions(mpaClient, 0, mpainformers.WithNamespace(o.Namespace),
		mpainformers.WithTransform(apiclient.DropManagedFields))
	kubeInf := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, kubeinformers.WithNamespace(o.Namespace))
	podInf := kubeInf.Core().V1().Pods()
	if err := podInf.Informer().SetTransform(trimPod); err != nil {
		return fmt.Errorf("pod cache transform: %w", err)
	}
	if err := podindex.Add(podInf.Informer()); err != nil {
		return err
	}
	// Deployments, StatefulSets and ReplicaSets are read from watches
	// rather than one /scale request per autoscaler and loop.
	if err := resolver.UseInformers(kubeInf); err != nil {
		return fmt.Errorf("scale target watches: %w", err)
	}
	if err := resolver.RegisterMetrics(reg, "updater"); err != nil {
		return err
	}
	mpaInformer := mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers()

	recorder, stopEvents, err := clients.NewRecorder(ctx, "aware-updater")
	if err != nil {
		return err
	}
	defer stopEvents()

	ctrlCfg := o.ControllerConfig()
	if ctrlCfg.AdmissionLeaseName == "" {
		logger.Info("Admission heartbeat guard disabled: evicted pods may come back without their recommendation")
	}
	c := controller.New(ctrlCfg, kubeClient, mpaClient, mpaInformer.Lister(), podindex.New(podInf.Informer().GetIndexer()), resolver, recorder, metrics, nil)

	var synced atomic.Bool
	ready := func() error {
		if !synced.Load() {
			return errors.New("caches not synced")
		}
		return nil
	}
	// lead runs the informers and the loop; it returns when ctx ends.
	lead := func(ctx context.Context) error {
		mpaInf.Start(ctx.Done())
		kubeInf.Start(ctx.Done())
		defer mpaInf.Shutdown()
		defer kubeInf.Shutdown()
		if !cache.WaitForCacheSync(ctx.Done(), mpaInformer.Informer().HasSynced, podInf.Informer().HasSynced) {
			return fmt.Errorf("waiting for caches: %w", ctx.Err())
		}
		synced.Store(true)
		defer synced.Store(false)
		c.Run(ctx)
		return nil
	}

	g, gctx := errgroup.WithContext(ctx)
	o.Endpoints.Start(gctx, g, endpoints)
	g.Go(func() error { return leader.Run(gctx, o.Leader, kubeClient, recorder, endpoints, ready, lead) })
	return g.Wait()
}
