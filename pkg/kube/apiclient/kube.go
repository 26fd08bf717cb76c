// Package apiclient builds the API clients every component uses from one set of
// flags, so each binary reads a kubeconfig, sets its rate limits and names
// itself in the User-Agent the same way.
package apiclient

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/aware-k8s/aware/pkg/generated/clientset/versioned"
	mpascheme "github.com/aware-k8s/aware/pkg/generated/clientset/versioned/scheme"
	"github.com/aware-k8s/aware/pkg/kube/target"
)

// Options locate the API server and bound the load a component puts on it.
type Options struct {
	// Kubeconfig is a kubeconfig path; empty means in-cluster.
	Kubeconfig string
	QPS        float32
	Burst      int
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Path to a kubeconfig file. Empty means the in-cluster configuration.")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Queries per second to the API server.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Burst of queries to the API server.")
}

// Validate reports impossible rate limits.
func (o *Options) Validate() error {
	if o.QPS <= 0 || o.Burst < 1 {
		return errors.New("--kube-api-qps must be > 0 and --kube-api-burst >= 1")
	}
	return nil
}

// Clients are the API clients shared by the components.
type Clients struct {
	// Config speaks JSON (custom resources need it); Kube speaks protobuf
	// (Protobuf).
	Config *rest.Config
	Kube   kubernetes.Interface
	MPA    versioned.Interface
	// Targets resolves scaleTargetRefs through the scale subresource.
	Targets *target.Resolver
}

// restConfig loads the kubeconfig of o, identifying as userAgent.
func restConfig(o Options, userAgent string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	return rest.AddUserAgent(cfg, userAgent), nil
}

// Protobuf returns a copy of cfg that speaks protobuf to the API server, for
// the built-in API groups and aggregated APIs built on the same machinery
// (metrics.k8s.io): encoding and decoding protobuf costs the API server and
// the component a fraction of JSON's CPU and allocations, most of all in the
// watches and lists of pods every component holds. JSON stays in the Accept
// header as a fallback for a server that cannot encode a type as protobuf.
// Custom resources (MultidimPodAutoscalers and their checkpoints, the rival
// autoscalers read through the dynamic client) have no protobuf encoding:
// their clients keep cfg's JSON.
func Protobuf(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c
}

// DropManagedFields is an informer transform (cache.TransformFunc) that
// drops metadata.managedFields from every cached object: no component reads
// them, and they are often the largest part of a small object's metadata
// (one entry per field manager, each a JSON field set), so a cache of
// thousands of autoscalers holds them for nothing. Writing an object read
// from such a cache is safe: the API server keeps the stored managedFields
// when an update carries none. It changes the freshly decoded object in
// place, as transforms may; anything that is not an object (a tombstone)
// passes through.
func DropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// NewKube builds the core Kubernetes client alone, for a component that
// needs no other (the rl-agent's self-managed certificates).
func NewKube(o Options, userAgent string) (kubernetes.Interface, error) {
	cfg, err := restConfig(o, userAgent)
	if err != nil {
		return nil, err
	}
	k, err := kubernetes.NewForConfig(Protobuf(cfg))
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return k, nil
}

// NewClients builds the clients, identifying as userAgent.
func NewClients(o Options, userAgent string) (*Clients, error) {
	cfg, err := restConfig(o, userAgent)
	if err != nil {
		return nil, err
	}
	c := &Clients{Config: cfg}
	if c.Kube, err = kubernetes.NewForConfig(Protobuf(cfg)); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if c.MPA, err = versioned.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("autoscaler client: %w", err)
	}
	if c.Targets, err = target.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("scale target resolver: %w", err)
	}
	return c, nil
}

// NewRecorder returns an event recorder for component that knows the core
// and MultidimPodAutoscaler types, and a function that stops it; call stop
// after the last event has been recorded.
func (c *Clients) NewRecorder(ctx context.Context, component string) (recorder record.EventRecorder, stop func(), err error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), mpascheme.AddToScheme(scheme)); err != nil {
		return nil, nil, fmt.Errorf("event scheme: %w", err)
	}
	// The broadcaster outlives ctx on purpose: components record events
	// during graceful shutdown (leader election's "stopped leading"), after
	// ctx is cancelled. Only stop ends it; ctx still carries the logger.
	broadcaster := record.NewBroadcaster(record.WithContext(context.WithoutCancel(ctx)))
	broadcaster.StartStructuredLogging(4)
	broadcaster.StartRecordingToSink(newRetryTransient(&typedcorev1.EventSinkImpl{Interface: c.Kube.CoreV1().Events("")}))
	return broadcaster.NewRecorder(scheme, corev1.EventSource{Component: component}), broadcaster.Shutdown, nil
}
