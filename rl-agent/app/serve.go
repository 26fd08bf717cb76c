package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/aware-k8s/aware/pkg/kube/apiclient"
	"github.com/aware-k8s/aware/pkg/kube/certs"

	"github.com/aware-k8s/aware/pkg/core/lifecycle"
	"github.com/aware-k8s/aware/pkg/kube/serve"
	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	"github.com/aware-k8s/aware/rl-agent/server"
)

// serveOptions are the flags of `rl-agent serve`.
type serveOptions struct {
	ListenAddress string
	StateDir      string
	// TLS is the mutual TLS of the gRPC service; AuthorizedIdentities are
	// the client identities that may call every method (the recommender).
	TLS                  certs.LinkOptions
	AuthorizedIdentities []string
	// Kube reaches the API server for self-managed certificates only.
	Kube                apiclient.Options
	MetricsBindAddress  string
	HealthBindAddress   string
	ShutdownGracePeriod time.Duration
	Profiling           bool
	CheckpointInterval  time.Duration
	Seed                uint64
	MaxBatch            int
	BatchWait           time.Duration
	QueueSize           int
	MaxWorkloads        int
	MaxFrozenPolicies   int
	WorkloadTTL         time.Duration
	InitialCheckpoint   string
	// RetrainMin and RetrainMax bound each stay in Retraining, in
	// episodes (server.Options.Retraining).
	RetrainMin, RetrainMax int
	// Policy is the kind of policy served: nn.KindPPO or
	// nn.KindMetaPPO; empty means the kind of InitialCheckpoint, or PPO
	// without one.
	Policy string
	// ActionSpace is the action space of a fresh policy: "paper" or
	// "residual"; empty means the checkpoint's, or without one residual
	// for PPO and paper for Meta-PPO (as it was before it had residual
	// heads).
	ActionSpace string
	// MetaSignature gives a fresh Meta-PPO's encoder the workload's
	// signature (learn.Signature) in every step; a checkpoint keeps what it
	// was trained with.
	MetaSignature bool
	// EnsembleCheckpoints are residual PPO checkpoints served as one
	// frozen ensemble (server.Ensemble) instead of a learner;
	// EnsembleQuorum is how many must agree to deviate (0: all).
	EnsembleCheckpoints []string
	EnsembleQuorum      int
}

// The action spaces of --action-space (learn.PolicyShape.String).
const (
	actionSpacePaper    = "paper"
	actionSpaceResidual = "residual"
)

// actionSpaceOf names the action space of a policy that initialPolicy
// accepted.
func actionSpaceOf(c nn.Config) string {
	sh, _ := learn.ShapeOf(c)
	return sh.String()
}

func newServeOptions() *serveOptions {
	d := server.DefaultOptions()
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "aware-system"
	}
	return &serveOptions{
		// Loopback by default: even with mutual TLS, the network is an
		// operator's choice (in a cluster: --listen-address=:9090).
		ListenAddress: "127.0.0.1:9090",
		TLS: certs.NewLinkOptions("tls-", certs.LinkServer, "aware-rl-agent", []string{
			"aware-rl-agent." + ns + ".svc", "aware-rl-agent." + ns + ".svc.cluster.local", "localhost", "127.0.0.1",
		}),
		AuthorizedIdentities: []string{"aware-recommender"},
		Kube:                 apiclient.Options{QPS: 5, Burst: 10},
		MetricsBindAddress:   ":8080",
		HealthBindAddress:    ":8081",
		ShutdownGracePeriod:  10 * time.Second,
		CheckpointInterval:   d.FlushInterval,
		Seed:                 1,
		MaxBatch:             d.MaxBatch,
		BatchWait:            d.BatchWait,
		QueueSize:            d.QueueSize,
		MaxWorkloads:         d.MaxWorkloads,
		RetrainMin:           d.Retraining.Min,
		RetrainMax:           d.Retraining.Max,
		MaxFrozenPolicies:    d.MaxFrozenPolicies,
		WorkloadTTL:          d.WorkloadTTL,
	}
}

// AddFlags registers the serve flags on fs.
func (o *serveOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ListenAddress, "listen-address", o.ListenAddress, "Address (host:port) of the gRPC AgentService and health service. The default accepts local connections only; use e.g. :9090 in a cluster, with TLS.")
	fs.StringVar(&o.StateDir, "state-dir", o.StateDir, "Directory for the experience log and checkpoints (required). It is locked: one agent per directory. Restored at start.")
	o.TLS.AddFlags(fs)
	fs.StringSliceVar(&o.AuthorizedIdentities, "authorized-client-identities", o.AuthorizedIdentities, "Client certificate identities (common name or URI SAN) that may call Recommend, ReportOutcome and every other method that reports outcomes or changes state. Any client with a certificate from the trusted CA may call GetPolicyStatus and the health service; nobody else may call anything. Ignored with --tls-mode=plaintext.")
	o.Kube.AddFlags(fs)
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, "Address to serve Prometheus metrics on (host:port); \"0\" disables the endpoint.")
	fs.StringVar(&o.HealthBindAddress, "health-bind-address", o.HealthBindAddress, "Address to serve /healthz and /readyz on (host:port); \"0\" disables the endpoint (the gRPC health service is always served).")
	fs.DurationVar(&o.ShutdownGracePeriod, "shutdown-grace-period", o.ShutdownGracePeriod, "How long in-flight calls may take at shutdown before connections are closed.")
	fs.BoolVar(&o.Profiling, "profiling", o.Profiling, serve.ProfilingHelp)
	fs.DurationVar(&o.CheckpointInterval, "checkpoint-interval", o.CheckpointInterval, "How often experience is flushed and the policy and stages are checkpointed (also at shutdown).")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "Seed of the initial policy weights and of exploration.")
	fs.IntVar(&o.MaxBatch, "max-batch", o.MaxBatch, "Most decisions answered by one forward pass of the policy.")
	fs.DurationVar(&o.BatchWait, "batch-wait", o.BatchWait, "Longest a decision waits for concurrent ones to share its forward pass; 0 disables waiting.")
	fs.IntVar(&o.QueueSize, "queue-size", o.QueueSize, "Decisions that may wait for a forward pass; beyond it calls fail with UNAVAILABLE and the recommender falls back to its default.")
	fs.IntVar(&o.MaxWorkloads, "max-workloads", o.MaxWorkloads, "Most workloads the agent tracks; beyond it new workloads get RESOURCE_EXHAUSTED (aware_rlagent_workload_capacity_ratio says how full it is). A workload is dropped when the recommender reports its autoscaler deleted (ForgetWorkload) or after --workload-ttl without a call.")
	fs.DurationVar(&o.WorkloadTTL, "workload-ttl", o.WorkloadTTL, "Forget a workload (stage, statistics, pinned policy, experience) that made no call for this long: its autoscaler was deleted while no recommender could report it, or its spec.rl.mode has been Off that long (it then starts again in Bootstrapping). 0 keeps workloads until the recommender reports them deleted.")
	fs.IntVar(&o.MaxFrozenPolicies, "max-frozen-policies", o.MaxFrozenPolicies, "Most frozen copies of the policy kept for Serving workloads, which act with the weights of their promotion while the policy trains on (one copy per version pinned, the size of the weights). A workload promoted when that many are pinned, none of the current version, shares the newest copy (logged and counted in aware_rlagent_frozen_policy_cap_shares_total).")
	fs.StringVar(&o.InitialCheckpoint, "initial-checkpoint", o.InitialCheckpoint, "A policy checkpoint written by rl-agent train (PPO, or Meta-PPO with --policy=meta-ppo) to start from instead of random weights. A Meta-PPO policy reads each workload's recent trajectory, which the agent then keeps. State already in --state-dir wins over it, but must hold the same kind and architecture of policy: keep the flag across restarts.")
	fs.IntVar(&o.RetrainMin, "retrain-min-episodes", o.RetrainMin, "After the detector fires, the defaults act for at least this many episodes (spec.rl.gates.episodeSteps ticks each) while the agent relearns from them, before the promotion gate may return the workload to the agent; 0: no minimum.")
	fs.IntVar(&o.RetrainMax, "retrain-max-episodes", o.RetrainMax, "After this many episodes in Retraining the workload returns to the agent (OnlineTraining) even if the defaults never pass the promotion gate, e.g. because the change lowered what they attain; 0: only the gate returns it, and a workload whose defaults stay below the gate stays on them.")
	fs.StringVar(&o.ActionSpace, "action-space", o.ActionSpace, "Actions of the policy: \"paper\" (no-op, ±1 replica, ±CPU step, ±memory step) or \"residual\" (one choice per dimension relative to the recommender's default: follow, hold, offsets and factors; a fresh residual policy, ppo or meta-ppo, follows the default). Empty: the --initial-checkpoint's, or residual (paper for --policy=meta-ppo). State already in --state-dir must hold the same: keep the flag across restarts.")
	fs.StringSliceVar(&o.EnsembleCheckpoints, "ensemble-checkpoints", o.EnsembleCheckpoints, "Serve these residual PPO checkpoints (at least 2, e.g. from rl-agent train with --seed=1, 2 and 3) as one frozen ensemble instead of a learner: per dimension it deviates from the recommender's default only as far as --ensemble-quorum of them agree, and follows it otherwise. Nothing trains; workloads bootstrap, are promoted and handed back to the defaults by the lifecycle gates as usual, and OnlineTraining decides as greedily as Serving. The state directory keeps stages and experience, never weights: it cannot be shared with a learner.")
	fs.IntVar(&o.EnsembleQuorum, "ensemble-quorum", o.EnsembleQuorum, "With --ensemble-checkpoints: how many members must deviate from the default the same way for the ensemble to deviate (it goes as far as that many go); 0 means all of them. A majority gives the members' median, which deviates more often.")
	fs.BoolVar(&o.MetaSignature, "meta-signature", o.MetaSignature, "With --policy=meta-ppo and no --initial-checkpoint: the encoder also reads each step's workload signature (CPU time per request, memory and requests in flight per pod, the pods' start-up delay, which the recommender sends), which the state leaves out. A checkpoint keeps what it was trained with (rl-agent train --meta-signature). State already in --state-dir must hold the same: keep the flag across restarts.")
	fs.StringVar(&o.Policy, "policy", o.Policy, "Kind of policy to serve: \"ppo\" or \"meta-ppo\" (a GRU encoder reads each workload's recent trajectory). Without --initial-checkpoint the policy starts from random weights seeded by --seed; with it, the checkpoint must hold this kind. Empty: the checkpoint's kind, or ppo. State already in --state-dir must hold the same kind: keep the flag across restarts.")
}

// Validate reports every invalid option at once.
func (o *serveOptions) Validate() error {
	var errs []error
	addr := func(flag, v string, disable bool) {
		if disable && v == "0" {
			return
		}
		if _, _, err := net.SplitHostPort(v); err != nil {
			errs = append(errs, fmt.Errorf("--%s %q: %w", flag, v, err))
		}
	}
	addr("listen-address", o.ListenAddress, false)
	addr("metrics-bind-address", o.MetricsBindAddress, true)
	addr("health-bind-address", o.HealthBindAddress, true)
	if o.Profiling && o.MetricsBindAddress == "0" {
		errs = append(errs, errors.New("--profiling serves on the metrics address, which --metrics-bind-address=0 disables"))
	}
	if o.StateDir == "" {
		errs = append(errs, errors.New("--state-dir is required"))
	}
	errs = append(errs, o.TLS.Validate())
	if o.TLS.EffectiveMode() != certs.LinkModePlaintext && len(o.AuthorizedIdentities) == 0 {
		errs = append(errs, errors.New("--authorized-client-identities must name at least one identity (the recommender's)"))
	}
	if o.TLS.NeedsSecrets() {
		errs = append(errs, o.Kube.Validate())
	}
	if o.ShutdownGracePeriod <= 0 || o.CheckpointInterval <= 0 {
		errs = append(errs, errors.New("--shutdown-grace-period and --checkpoint-interval must be positive"))
	}
	if o.WorkloadTTL < 0 {
		errs = append(errs, fmt.Errorf("--workload-ttl must not be negative, got %s", o.WorkloadTTL))
	}
	if o.BatchWait < 0 || o.BatchWait > time.Second {
		errs = append(errs, fmt.Errorf("--batch-wait must be in [0, 1s], got %s", o.BatchWait))
	}
	if o.MaxBatch < 1 || o.QueueSize < 1 || o.MaxWorkloads < 1 || o.MaxFrozenPolicies < 1 {
		errs = append(errs, errors.New("--max-batch, --queue-size, --max-workloads and --max-frozen-policies must be at least 1"))
	}
	if err := (lifecycle.RetrainingBounds{Min: o.RetrainMin, Max: o.RetrainMax}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--retrain-min-episodes, --retrain-max-episodes: %w", err))
	}
	switch o.Policy {
	case "", nn.KindPPO, nn.KindMetaPPO:
	default:
		errs = append(errs, fmt.Errorf("--policy must be %q or %q, got %q", nn.KindPPO, nn.KindMetaPPO, o.Policy))
	}
	switch o.ActionSpace {
	case "", actionSpacePaper:
	case actionSpaceResidual:
	default:
		errs = append(errs, fmt.Errorf("--action-space must be %q or %q, got %q", actionSpacePaper, actionSpaceResidual, o.ActionSpace))
	}
	if o.MetaSignature && (o.Policy != nn.KindMetaPPO || o.InitialCheckpoint != "") {
		errs = append(errs, errors.New("--meta-signature configures a fresh Meta-PPO: it needs --policy=meta-ppo and no --initial-checkpoint, whose policy keeps what it was trained with"))
	}
	if n := len(o.EnsembleCheckpoints); n > 0 {
		if n < 2 {
			errs = append(errs, fmt.Errorf("--ensemble-checkpoints needs at least 2 checkpoints, got %d", n))
		}
		if o.InitialCheckpoint != "" {
			errs = append(errs, errors.New("--ensemble-checkpoints and --initial-checkpoint exclude each other: an ensemble does not train from a starting point"))
		}
		if o.Policy == nn.KindMetaPPO || o.ActionSpace == actionSpacePaper {
			errs = append(errs, fmt.Errorf("--ensemble-checkpoints serves %s policies in the %s action space; --policy=%q --action-space=%q", nn.KindPPO, actionSpaceResidual, o.Policy, o.ActionSpace))
		}
		if o.EnsembleQuorum < 0 || o.EnsembleQuorum > n {
			errs = append(errs, fmt.Errorf("--ensemble-quorum must be in [0, %d] (0: all members), got %d", n, o.EnsembleQuorum))
		}
	} else if o.EnsembleQuorum != 0 {
		errs = append(errs, errors.New("--ensemble-quorum needs --ensemble-checkpoints"))
	}
	return errors.Join(errs...)
}

func newServeCommand() *cobra.Command {
	o := newServeOptions()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the agent over gRPC to the recommender",
		Long: `serve runs the AWARE agent as the gRPC AgentService (proto/aware/rlagent/v1)
that the recommender calls once per workload and tick. Each workload starts
in Bootstrapping (the defaults act while the agent learns from them), moves
to OnlineTraining once its reward passes the gates of spec.rl, then to
Serving, and to Retraining when its reward drops. Experience, the policy and
every workload's stage are kept in --state-dir and survive restarts and
crashes. The standard gRPC health service is served beside the agent, and
Prometheus metrics (aware_rlagent_*) on --metrics-bind-address.

The gRPC service uses mutual TLS (--tls-mode: certificate files, or a CA
shared with the recommender through a Secret) and lets only
--authorized-client-identities report outcomes or change state;
--tls-mode=plaintext turns this off and logs a warning.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return fmt.Errorf("invalid flags: %w", err)
			}
			return runServe(cmd.Context(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func runServe(ctx context.Context, o *serveOptions) (err error) {
	logger := klog.FromContext(ctx)
	// Fail fast on the certificates: without them nothing can be served.
	link, err := openLink(ctx, o)
	if err != nil {
		return err
	}
	st, rec, err := store.Open(o.StateDir)
	if errors.Is(err, store.ErrUnsupportedVersion) {
		return refuseNewerState(err, o.StateDir)
	}
	if err != nil {
		return fmt.Errorf("open state directory: %w", err)
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close state directory: %w", cerr))
		}
	}()
	if rec.DiscardedBytes > 0 {
		logger.Info("Discarded the torn tail of the experience log (the previous run crashed)", "bytes", rec.DiscardedBytes, "records", rec.Records)
	}

	var ens *server.Ensemble
	var ppo *nn.PPO
	var meta *nn.MetaPPO
	if len(o.EnsembleCheckpoints) > 0 {
		ens, err = loadEnsemble(o.EnsembleCheckpoints, o.EnsembleQuorum)
	} else {
		ppo, meta, err = initialPolicy(o)
	}
	if err != nil {
		return err
	}
	switch {
	case ens != nil:
		logger.Info("Serving a frozen ensemble: it never trains", "checkpoints", o.EnsembleCheckpoints, "quorum", o.EnsembleQuorum)
	case o.InitialCheckpoint == "" && meta != nil:
		c := meta.Config()
		logger.Info("Starting from a random policy unless the state directory holds one", "kind", nn.KindMetaPPO, "hidden", c.Hidden, "window", c.Window, "embedDim", c.EmbedDim, "signatureDim", c.SignatureDim, "seed", o.Seed)
	case o.InitialCheckpoint == "":
		logger.Info("Starting from a random policy unless the state directory holds one", "kind", nn.KindPPO, "actionSpace", actionSpaceOf(ppo.Config()), "hidden", ppo.Config().Hidden, "seed", o.Seed)
	case meta != nil:
		c := meta.Config()
		logger.Info("Starting from a trained policy unless the state directory holds one", "checkpoint", o.InitialCheckpoint, "kind", nn.KindMetaPPO, "hidden", c.Hidden, "window", c.Window, "embedDim", c.EmbedDim)
	default:
		logger.Info("Starting from a trained policy unless the state directory holds one", "checkpoint", o.InitialCheckpoint, "kind", nn.KindPPO, "actionSpace", actionSpaceOf(ppo.Config()), "hidden", ppo.Config().Hidden)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	so := server.DefaultOptions()
	switch {
	case ens != nil:
		so.Ensemble = ens
	case meta != nil:
		so.MetaLearner = meta
	default:
		so.Learner = ppo
	}
	so.Store, so.Registerer, so.Seed = st, reg, o.Seed
	so.Retraining = lifecycle.RetrainingBounds{Min: o.RetrainMin, Max: o.RetrainMax}
	so.FlushInterval, so.MaxBatch, so.BatchWait, so.QueueSize, so.MaxWorkloads = o.CheckpointInterval, o.MaxBatch, o.BatchWait, o.QueueSize, o.MaxWorkloads
	so.MaxFrozenPolicies, so.WorkloadTTL = o.MaxFrozenPolicies, o.WorkloadTTL
	srv, err := server.New(so)
	if errors.Is(err, store.ErrUnsupportedVersion) {
		return refuseNewerState(err, o.StateDir)
	}
	if errors.Is(err, store.ErrCorrupt) {
		// Starting empty would overwrite what was learnt at the first
		// checkpoint: refuse, and leave the file for the operator.
		return fmt.Errorf("%w; refusing to start, and leaving the state in %s untouched: restore the checkpoint from a backup, or move the directory's *.ckpt away to start from an empty state", err, o.StateDir)
	}
	if err != nil {
		return err
	}

	gopts := []grpc.ServerOption{
		// The recommender keeps one long-lived connection; let it ping
		// through idle periods without being cut off.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
	if link != nil {
		auth, err := server.NewAuthorizer(o.AuthorizedIdentities, reg)
		if err != nil {
			srv.Close()
			return err
		}
		// Metrics first, so refused calls are counted by code too.
		gopts = append(gopts, grpc.Creds(credentials.NewTLS(link.ServerConfig())),
			grpc.ChainUnaryInterceptor(srv.UnaryInterceptor(), auth.UnaryInterceptor()),
			grpc.ChainStreamInterceptor(auth.StreamInterceptor()))
		logger.Info("Serving gRPC with mutual TLS", "authorizedIdentities", o.AuthorizedIdentities)
	} else {
		gopts = append(gopts, grpc.ChainUnaryInterceptor(srv.UnaryInterceptor()))
		logger.Info("WARNING: --tls-mode=plaintext: serving gRPC without TLS or authentication; any client that reaches the address can feed the agent transitions and steer scaling", "address", o.ListenAddress)
	}
	lis, err := net.Listen("tcp", o.ListenAddress)
	if err != nil {
		srv.Close()
		return fmt.Errorf("listen on %s: %w", o.ListenAddress, err)
	}
	g := grpc.NewServer(gopts...)
	srv.Register(g)

	endpoints := serve.New(reg)
	endpoints.AddReadyCheck("agent", srv.Ready)
	eg, gctx := errgroup.WithContext(ctx)
	for i, a := range []string{o.MetricsBindAddress, o.HealthBindAddress} {
		// Both endpoints share one handler, so one listener serves both
		// when the addresses are equal.
		if a == "0" || (i == 1 && a == o.MetricsBindAddress) {
			continue
		}
		h := endpoints.Handler()
		if i == 0 && o.Profiling {
			h = endpoints.ProfilingHandler()
		}
		eg.Go(func() error { return serve.Run(gctx, a, h, o.ShutdownGracePeriod) })
	}
	if link != nil {
		eg.Go(func() error { link.Run(gctx); return nil })
	}
	eg.Go(func() error { return server.Serve(gctx, g, lis, srv, o.ShutdownGracePeriod) })
	return eg.Wait()
}

// refuseNewerState is the error of an agent whose state directory was
// written by a newer one: downgrades are not supported (docs/operations.md,
// "Compatibility"), and starting empty would overwrite what was learnt.
func refuseNewerState(err error, dir string) error {
	return fmt.Errorf("%w; the state in %s was written by a newer rl-agent, and downgrades are not supported: refusing to start, and leaving it untouched. Run the newer version, or restore a backup of the directory taken before the upgrade", err, dir)
}

// openLink loads the gRPC service's certificates; nil in plaintext mode.
func openLink(ctx context.Context, o *serveOptions) (*certs.Link, error) {
	var secrets corev1client.SecretsGetter
	if o.TLS.NeedsSecrets() {
		k, err := apiclient.NewKube(o.Kube, "aware-rl-agent")
		if err != nil {
			return nil, err
		}
		secrets = k.CoreV1()
	}
	return o.TLS.Open(ctx, secrets, clock.RealClock{})
}

// loadEnsemble reads the weights of the ensemble's members (server.New
// checks that they form one).
func loadEnsemble(paths []string, quorum int) (*server.Ensemble, error) {
	e := &server.Ensemble{Quorum: quorum}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("--ensemble-checkpoints: %w", err)
		}
		f, err := nn.FreezeCheckpoint(b)
		if err != nil {
			return nil, fmt.Errorf("--ensemble-checkpoints %s: %w", p, err)
		}
		e.Members = append(e.Members, f)
	}
	return e, nil
}

// initialPolicy is the policy the agent starts from, exactly one of ppo
// and meta: random weights of --policy seeded by --seed, or the PPO or
// Meta-PPO checkpoint of --initial-checkpoint, which must be of --policy's
// kind when that is set, read the agent's state features and choose among
// its actions.
func initialPolicy(o *serveOptions) (ppo *nn.PPO, meta *nn.MetaPPO, err error) {
	if o.InitialCheckpoint == "" {
		cfg := nn.DefaultConfig(learn.StateDim, int(learn.NumActions))
		if o.ActionSpace == actionSpaceResidual || (o.ActionSpace == "" && o.Policy != nn.KindMetaPPO) {
			cfg = learn.ResidualConfig(learn.DefaultFollowBias)
		}
		cfg.Seed = o.Seed
		if o.Policy == nn.KindMetaPPO {
			mc := nn.DefaultMetaConfig(learn.StateDim, int(learn.NumActions))
			mc.Config = cfg
			if o.MetaSignature {
				mc.SignatureDim = learn.SignatureDim
			}
			if meta, err = nn.NewMetaPPO(mc); err != nil {
				return nil, nil, fmt.Errorf("create policy: %w", err)
			}
			return nil, meta, nil
		}
		if ppo, err = nn.NewPPO(cfg); err != nil {
			return nil, nil, fmt.Errorf("create policy: %w", err)
		}
		return ppo, nil, nil
	}
	b, err := os.ReadFile(o.InitialCheckpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("--initial-checkpoint: %w", err)
	}
	kind, err := nn.CheckpointKind(b)
	if err != nil {
		return nil, nil, fmt.Errorf("--initial-checkpoint %s: %w", o.InitialCheckpoint, err)
	}
	if o.Policy != "" && kind != o.Policy {
		return nil, nil, fmt.Errorf("--initial-checkpoint %s: %w: it holds a %q policy, --policy is %q",
			o.InitialCheckpoint, nn.ErrIncompatibleCheckpoint, kind, o.Policy)
	}
	var c nn.Config
	switch kind {
	case nn.KindPPO:
		if ppo, err = nn.NewPPOFromCheckpoint(b); err == nil {
			c = ppo.Config()
		}
	case nn.KindMetaPPO:
		if meta, err = nn.NewMetaPPOFromCheckpoint(b); err == nil {
			c = meta.Config().Config
		}
	default:
		return nil, nil, fmt.Errorf("--initial-checkpoint %s: %w: it holds a %q policy; serve runs %q and %q policies",
			o.InitialCheckpoint, nn.ErrIncompatibleCheckpoint, kind, nn.KindPPO, nn.KindMetaPPO)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("--initial-checkpoint %s: %w", o.InitialCheckpoint, err)
	}
	sh, err := learn.ShapeOf(c)
	if err != nil {
		return nil, nil, fmt.Errorf("--initial-checkpoint %s: %w", o.InitialCheckpoint, err)
	}
	if o.ActionSpace != "" && sh.String() != o.ActionSpace {
		return nil, nil, fmt.Errorf("--initial-checkpoint %s: %w: it acts in the %s action space, --action-space is %q",
			o.InitialCheckpoint, nn.ErrIncompatibleCheckpoint, sh, o.ActionSpace)
	}
	return ppo, meta, nil
}
