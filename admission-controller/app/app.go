// Package app wires the admission-controller binary: its cobra command, options and
// run loop.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/aware-k8s/aware/admission-controller/pkg/heartbeat"
	"github.com/aware-k8s/aware/admission-controller/pkg/match"
	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/admission-controller/pkg/webhook"
	mpainformers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/certs"
	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/pkg/kube/serve"
)

// NewCommand returns the admission-controller root command.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	logging := cli.NewLogging()
	cmd := &cobra.Command{
		Use:   "admission-controller",
		Short: "Mutating webhook that sets pod resources at creation",
		Long: `The admission controller is a mutating webhook on pod CREATE: it sets each
container's requests and limits from the matching MultidimPodAutoscaler's
recommendation, within its resource policy. It fails open.

Serving certificate: with --tls-cert-file (or --cert-mode=files) it serves
the given files and re-reads them when they change (e.g. cert-manager).
Otherwise (--cert-mode=self-managed, the default) it generates a CA and a
serving certificate, keeps them in the Secret --cert-secret-name in
--namespace, shared by all replicas, and renews them before they expire;
this Secret is the only object it writes without --register-webhook.

Without --register-webhook it does not touch the admission chain:
registering the webhook is left to the operator's manifests. With it, the
MutatingWebhookConfiguration --webhook-config-name (which the manifests
ship) is patched with the webhook this process serves and its CA bundle at
start and again whenever the CA bundle changes (a self-managed rotation, or
a changed --webhook-ca-bundle-file); that needs get and patch on that one
name. A missing one is created, which needs create as well.`,
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

func run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx).WithName("admission-controller")
	ctx = klog.NewContext(ctx, logger)

	clients, err := apiclient.NewClients(o.Kube, "aware-admission-controller")
	if err != nil {
		return err
	}
	kube, mpaClient, resolver := clients.Kube, clients.MPA, clients.Targets
	meta, err := metadata.NewForConfig(clients.Config)
	if err != nil {
		return fmt.Errorf("metadata client: %w", err)
	}
	clk := clock.RealClock{}

	// Fail fast on the certificate: without it nothing can be served.
	certSrc, err := newCertSource(ctx, o, kube.CoreV1(), clk)
	if err != nil {
		return err
	}
	var registrar *register.Registrar
	if o.RegisterWebhook {
		if registrar, err = newRegistrar(o, kube.AdmissionregistrationV1().MutatingWebhookConfigurations(), certSrc.bundle, clk); err != nil {
			return err
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := webhook.NewMetrics(reg)
	if err != nil {
		return err
	}
	if err := certs.RegisterExpiry(reg, certSrc.getCertificate); err != nil {
		return err
	}
	endpoints := serve.New(reg)

	// Informers: MPAs (indexed by target), LimitRanges, and metadata only
	// of the intermediate owners (ReplicaSets, Jobs), stripped of managed
	// fields, which is all the owner walk reads.
	mpaFactory := mpainformers.NewSharedInformerFactory(mpaClient, 0)
	mpaInf := mpaFactory.Autoscaling().V1alpha1().MultidimPodAutoscalers().Informer()
	if err := match.AddTargetIndex(mpaInf); err != nil {
		return err
	}
	kubeFactory := kubeinformers.NewSharedInformerFactory(kube, 0)
	lrLister := kubeFactory.Core().V1().LimitRanges().Lister()
	metaFactory := metadatainformer.NewSharedInformerFactoryWithOptions(meta, 0, metadatainformer.WithTransform(stripManagedFields))
	owners := map[schema.GroupKind]kubeinformers.GenericInformer{}
	for gk, gvr := range match.FollowedKinds {
		owners[gk] = metaFactory.ForResource(gvr)
	}

	handler := &webhook.Handler{
		Matcher: &match.Matcher{
			MPAs:      &match.InformerIndex{Indexer: mpaInf.GetIndexer()},
			Owners:    match.NewMetadataOwners(owners, meta),
			Selectors: resolver,
		},
		LimitRanges: webhook.LimitRangesFunc(func(ns string) ([]*corev1.LimitRange, error) {
			return lrLister.LimitRanges(ns).List(labels.Everything())
		}),
		Metrics:      metrics,
		MaxBodyBytes: o.MaxRequestBytes,
		Timeout:      o.AdmissionTimeout,
	}

	var synced, serving atomic.Bool
	endpoints.AddHealthCheck("ping", func() error { return nil })
	endpoints.AddReadyCheck("caches", func() error {
		if !synced.Load() {
			return errors.New("MPA, LimitRange and owner caches not synced")
		}
		return nil
	})
	endpoints.AddReadyCheck("webhook", func() error {
		if !serving.Load() {
			return errors.New("webhook not listening")
		}
		return nil
	})

	g, ctx := errgroup.WithContext(ctx)
	mpaFactory.Start(ctx.Done())
	kubeFactory.Start(ctx.Done())
	metaFactory.Start(ctx.Done())
	g.Go(func() error {
		if !cache.WaitForCacheSync(ctx.Done(), mpaInf.HasSynced) {
			return nil // ctx ended
		}
		for typ, ok := range kubeFactory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("cache of %v did not sync", typ)
			}
		}
		for gvr, ok := range metaFactory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return fmt.Errorf("cache of %v did not sync", gvr)
			}
		}
		synced.Store(true)
		logger.Info("Caches synced")
		return nil
	})

	ln, err := serve.Listen(o.WebhookBindAddress)
	if err != nil {
		return err
	}
	serving.Store(true)
	g.Go(func() error {
		return webhook.Serve(ctx, ln, webhook.Mux(o.WebhookPath, handler, metrics), webhook.TLSConfig(certSrc.getCertificate), o.Endpoints.ShutdownGracePeriod)
	})
	o.Endpoints.Start(ctx, g, endpoints)

	if o.HeartbeatLeaseName != "" {
		identity, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("heartbeat identity: %w", err)
		}
		hb := &heartbeat.Heartbeat{
			Client: kube.CoordinationV1(), Namespace: o.Namespace, Name: o.HeartbeatLeaseName, Identity: identity,
			Interval: o.HeartbeatInterval, Duration: o.HeartbeatLeaseDuration, Clock: clk,
			Ready: func() bool { return synced.Load() && serving.Load() },
		}
		g.Go(func() error { hb.Run(ctx); return nil })
	}

	if certSrc.run != nil {
		g.Go(func() error { certSrc.run(ctx); return nil })
	}
	if registrar != nil {
		// Registered once at start, and a failure then is fatal, so that a
		// deployment asking for registration does not run silently
		// unregistered; later CA bundle changes are retried in the
		// background.
		if err := registrar.Sync(ctx); err != nil {
			return err
		}
		g.Go(func() error { registrar.Run(ctx); return nil })
	}

	return g.Wait()
}

// stripManagedFields drops what the owner walk never reads; managed fields
// are often the largest part of an object's metadata.
func stripManagedFields(obj any) (any, error) {
	if m, err := apimeta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
