// Package app wires the recommender binary: its cobra command, options and
// run loop.
package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	kubeinformers "k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/clock"

	"github.com/aware-k8s/aware/pkg/core/fusion"
	mpainformers "github.com/aware-k8s/aware/pkg/generated/informers/externalversions"
	"github.com/aware-k8s/aware/pkg/kube/agentclient"
	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/certs"
	"github.com/aware-k8s/aware/pkg/kube/cli"
	"github.com/aware-k8s/aware/pkg/kube/leader"
	"github.com/aware-k8s/aware/pkg/kube/rival"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/pkg/kube/target"
	"github.com/aware-k8s/aware/pkg/kube/usage"
	rlagentv1 "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
	"github.com/aware-k8s/aware/recommender/controller"
)

// NewCommand returns the recommender root command.
func NewCommand() *cobra.Command {
	opts := NewOptions()
	logging := cli.NewLogging()
	cmd := &cobra.Command{
		Use:   "recommender",
		Short: "Computes MultidimPodAutoscaler recommendations",
		Long: `The recommender watches MultidimPodAutoscaler objects, reads usage and
latency metrics, computes the fused HPA+VPA default recommendation, asks the
RL agent when spec.rl enables it, and writes the result into each object's
status.`,
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
	cmd.AddCommand(newWhatifCommand())
	return cmd
}

// targets adapts pkg/kube/target to the controller's interface, translating its
// typed errors into the controller's "cannot act on this" errors.
type targets struct{ r target.Interface }

var _ controller.TargetResolver = targets{}

// Target reads /scale once per call (as the HPA does every sync): its
// spec.replicas is the current scale, and its selector is parsed here
// rather than taken from the resolver's selector cache, which would cost a
// second read whenever the cache expired.
func (t targets) Target(ctx context.Context, ns string, ref *autoscalingv1.CrossVersionObjectReference) (controller.Target, error) {
	s, _, err := t.r.GetScale(ctx, ns, ref)
	if err == nil && s.Status.Selector == "" {
		// labels.Parse("") would select every pod in the namespace.
		err = fmt.Errorf("%s %s/%s: %w", ref.Kind, ns, ref.Name, target.ErrNoSelector)
	}
	var sel labels.Selector
	if err == nil {
		if sel, err = labels.Parse(s.Status.Selector); err != nil {
			err = fmt.Errorf("%s %s/%s: parsing selector %q: %w", ref.Kind, ns, ref.Name, s.Status.Selector, err)
		}
	}
	switch {
	case err == nil:
		return controller.Target{Selector: sel, Replicas: s.Spec.Replicas}, nil
	case errors.Is(err, target.ErrTargetNotFound):
		return controller.Target{}, fmt.Errorf("%w: %w", controller.ErrTargetNotFound, err)
	case target.IsUnsupported(err):
		return controller.Target{}, fmt.Errorf("%w: %w", controller.ErrTargetUnsupported, err)
	}
	return controller.Target{}, err
}

func run(ctx context.Context, o *Options) error {
	logger := klog.FromContext(ctx).WithName("recommender")
	def, err := o.defaultPolicy()
	if err != nil {
		return err // validated
	}
	logger.Info("Computing the default recommendations with a variant of the fused default (empty: the fused default)", "defaultVariant", o.DefaultVariant)
	ctx = klog.NewContext(ctx, logger)

	clients, err := apiclient.NewClients(o.Kube, "aware-recommender")
	if err != nil {
		return err
	}
	metrics, err := metricsclient.NewForConfig(apiclient.Protobuf(clients.Config))
	kubeClient, mpaClient, resolver := clients.Kube, clients.MPA, clients.Targets
	if err != nil {
		return fmt.Errorf("metrics.k8s.io client: %w", err)
	}

	reg := serve.NewRegistry()
	endpoints := serve.New(reg)

	mpaInf := mpainformers.NewSharedInformerFactoryWithOptions(mpaClient, 0, mpainformers.WithNamespace(o.Namespace),
		mpainformers.WithTransform(apiclient.DropManagedFields))
	kubeInf := kubeinformers.NewSharedInformerFactoryWithOptions(kubeClient, 0, kubeinformers.WithNamespace(o.Namespace))
	podInf := kubeInf.Core().V1().Pods()
	if err := podInf.Informer().SetTransform(controller.TrimPod); err != nil {
		return fmt.Errorf("pod cache transform: %w", err)
	}
	// Deployments, StatefulSets and ReplicaSets are read from watches
	// rather than one /scale request per autoscaler and loop.
	if err := resolver.UseInformers(kubeInf); err != nil {
		return fmt.Errorf("scale target watches: %w", err)
	}
	if err := resolver.RegisterMetrics(reg, "recommender"); err != nil {
		return err
	}

	var nodes coreinformers.NodeInformer
	if o.FitToNodes {
		nodes = kubeInf.Core().V1().Nodes()
		if err := nodes.Informer().SetTransform(controller.TrimNode); err != nil {
			return fmt.Errorf("node cache transform: %w", err)
		}
	}

	recorder, stopEvents, err := clients.NewRecorder(ctx, "aware-recommender")
	if err != nil {
		return err
	}
	defer stopEvents()

	cm, err := controller.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	var advisor controller.Advisor
	var link *certs.Link
	if o.RLAgentEndpoint != "" {
		creds, l, err := agentCredentials(ctx, o, kubeClient.CoreV1())
		if err != nil {
			return err
		}
		link = l
		conn, err := grpc.NewClient(o.RLAgentEndpoint, grpc.WithTransportCredentials(creds))
		if err != nil {
			return fmt.Errorf("rl agent client for %s: %w", o.RLAgentEndpoint, err)
		}
		defer conn.Close()
		advisor = agentclient.NewAdvisor(rlagentv1.NewAgentServiceClient(conn), agentclient.Options{
			Timeout:        o.RLAgentTimeout,
			Breaker:        agentclient.NewBreaker(o.RLAgentFailureThreshold, o.RLAgentCooldown),
			Observer:       cm,
			DefaultVariant: o.DefaultVariant,
		})
	}

	dyn, err := dynamic.NewForConfig(clients.Config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}

	deps := controller.Deps{
		Client:             mpaClient,
		MPAInformer:        mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalers(),
		CheckpointInformer: mpaInf.Autoscaling().V1alpha1().MultidimPodAutoscalerCheckpoints(),
		PodInformer:        podInf,
		Targets:            targets{r: resolver},
		Rivals:             rival.NewScanner(dyn, nil),
		Nodes:              nodes,
		Usage:              usage.NewMetricsAPI(metrics.MetricsV1beta1()),
		NewPolicy:          fusion.NewPolicyFactory(def),
		Recorder:           recorder,
		Clock:              clock.RealClock{},
		Registerer:         reg,
		Metrics:            cm,
		Advisor:            advisor,
		StatusWriter:       controller.RESTStatusWriter{Client: mpaClient.AutoscalingV1alpha1().RESTClient()},
	}
	if err := wirePrometheus(o, &deps); err != nil {
		return err
	}
	c, err := controller.New(controller.Config{
		RecommenderName:       o.RecommenderName,
		Interval:              o.Interval,
		StatusRefreshInterval: o.StatusRefreshInterval,
		StatusWriteTimeout:    o.StatusWriteTimeout,
		FailureWarning:        o.FailureWarning,
		CheckpointInterval:    o.CheckpointInterval,
		RivalScanInterval:     o.RivalScanInterval,
		Namespace:             o.Namespace,
		IgnoredNamespaces:     o.IgnoredNamespaces,
		Workers:               o.Workers,
		LowConfidenceDays:     o.LowConfidenceHistory.Hours() / 24,
		PrometheusConcurrency: o.PrometheusConcurrency,
		History: controller.HistoryConfig{
			Length: o.HistoryLength, Step: o.HistoryResolution, Concurrency: o.HistoryConcurrency, Timeout: o.HistoryTimeout,
		},
	}, deps)
	if err != nil {
		return fmt.Errorf("building controller: %w", err)
	}

	// lead runs the informers and the loop; it returns when ctx ends.
	lead := func(ctx context.Context) error {
		mpaInf.Start(ctx.Done())
		kubeInf.Start(ctx.Done())
		defer mpaInf.Shutdown()
		defer kubeInf.Shutdown()
		return c.Run(ctx)
	}

	g, gctx := errgroup.WithContext(ctx)
	if link != nil {
		g.Go(func() error { link.Run(gctx); return nil })
	}
	o.Endpoints.Start(gctx, g, endpoints)
	g.Go(func() error { return leader.Run(gctx, o.Leader, kubeClient, recorder, endpoints, c.Ready, lead) })
	return g.Wait()
}

// agentCredentials are the agent link's transport credentials: mutual TLS
// from --rl-agent-tls-*, with the link to keep current, or plaintext when
// asked for explicitly (logged as a warning).
func agentCredentials(ctx context.Context, o *Options, secrets corev1client.SecretsGetter) (credentials.TransportCredentials, *certs.Link, error) {
	link, err := o.RLAgentTLS.Open(ctx, secrets, clock.RealClock{})
	if err != nil {
		return nil, nil, err
	}
	if link == nil {
		klog.FromContext(ctx).Info("WARNING: --rl-agent-tls-mode=plaintext: calling the RL agent without TLS; its answers and the workloads' observations cross the network unauthenticated", "endpoint", o.RLAgentEndpoint)
		return insecure.NewCredentials(), nil, nil
	}
	return credentials.NewTLS(link.ClientConfig(endpointHost(o.RLAgentEndpoint))), link, nil
}

// endpointHost is the host a gRPC target dials, which the agent's
// certificate must name: "dns:///agent.ns.svc:9090" and "agent.ns.svc:9090"
// both give "agent.ns.svc".
func endpointHost(target string) string {
	target = target[strings.LastIndex(target, "/")+1:]
	if host, _, err := net.SplitHostPort(target); err == nil {
		return host
	}
	return target
}

// wirePrometheus sets the Prometheus-backed sources (SLO, goal metrics,
// history, CPU pressure) when --prometheus-address is set; current usage
// stays with metrics.k8s.io.
func wirePrometheus(o *Options, d *controller.Deps) error {
	if o.PrometheusAddress == "" {
		return nil
	}
	po := usage.PrometheusOptions{
		Address: o.PrometheusAddress,
		Timeout: o.PrometheusTimeout,
		Window:  o.PrometheusWindow,
		Queries: o.PrometheusQueries,

		ClusterWideExternalNamespaces: o.ClusterWideExternalNamespaces,
	}
	if d.Metrics != nil {
		po.Observer = d.Metrics
	}
	p, err := usage.NewPrometheus(po)
	if err != nil {
		return fmt.Errorf("prometheus source: %w", err)
	}
	d.SLO, d.Goals, d.History, d.Pressure = p, p, p, p
	return nil
}
