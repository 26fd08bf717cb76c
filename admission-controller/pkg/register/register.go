// Package register keeps the admission controller's own
// MutatingWebhookConfiguration, which the manifests ship, up to date
// (webhooks and caBundle), patching it. It is used only when the operator
// asks for it (--register-webhook); otherwise the binary changes nothing in
// the cluster's admission chain.
//
// The configuration is built to be harmless when we are down or wrong:
// failurePolicy Ignore by default, a short timeout, sideEffects None, and
// selectors that keep kube-system, our own namespace and pods labelled
// OptOutLabel=OptOutValue out of the webhook entirely, so neither the
// control plane nor the autoscaler's own pods can be blocked by it.
//
// Registrar keeps the registration's caBundle in line with a BundleSource
// (a self-managed CA that rotates, or a CA bundle file that changes).
package register

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	admissionclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Names and labels of the registration.
const (
	// DefaultConfigName is the MutatingWebhookConfiguration's name.
	DefaultConfigName = "aware-admission-controller"
	// WebhookName is the webhook's name inside it (must be a qualified
	// domain-like name).
	WebhookName = "pods.admission.autoscaling.aware.dev"
	// OptOutLabel on a pod, set to OptOutValue, keeps the webhook from
	// being called for it.
	OptOutLabel = "autoscaling.aware.dev/admission"
	OptOutValue = "disabled"
	// namespaceNameLabel is set on every namespace by the API server.
	namespaceNameLabel = "kubernetes.io/metadata.name"
)

// Config describes the registration. Exactly one of URL and Service is set.
type Config struct {
	Name string
	// URL is the webhook's https URL (URL mode, e.g. outside the cluster).
	URL string
	// Service names the Service in front of the webhook (service mode).
	Service *admissionregistrationv1.ServiceReference
	// CABundle is the PEM CA the API server uses to verify our certificate.
	CABundle       []byte
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds int32
	// ExcludedNamespaces never reach the webhook; kube-system and our own
	// namespace belong here.
	ExcludedNamespaces []string
	// NamespaceSelector, if set, further restricts the webhook to the
	// namespaces it matches (e.g. only those labelled for autoscaling, or
	// a single namespace); its requirements are ANDed with the exclusion
	// of ExcludedNamespaces, which it cannot widen.
	NamespaceSelector *metav1.LabelSelector
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	if (c.URL == "") == (c.Service == nil) {
		errs = append(errs, errors.New("exactly one of a webhook URL and a service must be given"))
	}
	if len(c.CABundle) == 0 {
		errs = append(errs, errors.New("a CA bundle is required so the API server can verify the webhook"))
	}
	if c.TimeoutSeconds < 1 || c.TimeoutSeconds > 30 {
		errs = append(errs, fmt.Errorf("timeout %ds must be within 1..30", c.TimeoutSeconds))
	}
	switch c.FailurePolicy {
	case admissionregistrationv1.Ignore, admissionregistrationv1.Fail:
	default:
		errs = append(errs, fmt.Errorf("failure policy %q must be Ignore or Fail", c.FailurePolicy))
	}
	return errors.Join(errs...)
}

// Build returns the desired configuration.
func Build(c *Config) *admissionregistrationv1.MutatingWebhookConfiguration {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: c.CABundle}
	if c.URL != "" {
		cc.URL = ptr.To(c.URL)
	} else {
		s := *c.Service
		cc.Service = &s
	}
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: map[string]string{"app.kubernetes.io/managed-by": "aware-admission-controller"}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         WebhookName,
			ClientConfig: cc,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			FailurePolicy:           ptr.To(c.FailurePolicy),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector:       namespaceSelector(c),
			ObjectSelector:          &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: OptOutLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{OptOutValue}}}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(c.TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			// Our patch is idempotent; a later webhook that adds a
			// container does not need us again (its containers have no
			// recommendation).
			ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		}},
	}
}

// namespaceSelector excludes c.ExcludedNamespaces and, if c has one, adds
// the requirements of c.NamespaceSelector: a label selector's requirements
// are ANDed, so the result matches only namespaces both allow.
func namespaceSelector(c *Config) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: c.ExcludedNamespaces}}}
	if extra := c.NamespaceSelector; extra != nil {
		if len(extra.MatchLabels) > 0 {
			sel.MatchLabels = maps.Clone(extra.MatchLabels)
		}
		for _, r := range extra.MatchExpressions {
			r.Values = slices.Clone(r.Values)
			sel.MatchExpressions = append(sel.MatchExpressions, r)
		}
	}
	return sel
}

// Apply patches the configuration when it differs from desired, writing
// only what it owns: the labels it sets and the webhooks. The configuration
// ships with the manifests (deploy/admission-controller), so that the
// admission controller needs only get and patch on that one name; a
// missing one is created, which needs create as well and otherwise fails
// with an error saying so.
func Apply(ctx context.Context, client admissionclient.MutatingWebhookConfigurationInterface, desired *admissionregistrationv1.MutatingWebhookConfiguration) error {
	logger := klog.FromContext(ctx).WithValues("mutatingWebhookConfiguration", desired.Name)
	cur, err := client.Get(ctx, desired.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err := client.Create(ctx, desired, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("MutatingWebhookConfiguration %s does not exist and may not be created: apply it from the manifests (deploy/admission-controller): %w", desired.Name, err)
		}
		if err != nil {
			return fmt.Errorf("create MutatingWebhookConfiguration %s: %w", desired.Name, err)
		}
		logger.Info("Registered the admission webhook")
		return nil
	}
	if err != nil {
		return fmt.Errorf("get MutatingWebhookConfiguration %s: %w", desired.Name, err)
	}
	labelsCurrent := true
	for k, v := range desired.Labels {
		if cur.Labels[k] != v {
			labelsCurrent = false
		}
	}
	if labelsCurrent && WebhooksEqual(cur.Webhooks, desired.Webhooks) {
		logger.V(2).Info("Admission webhook registration is up to date")
		return nil
	}
	patch, err := registrationPatch(cur.ResourceVersion, desired)
	if err != nil {
		return err
	}
	if _, err := client.Patch(ctx, desired.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch MutatingWebhookConfiguration %s: %w", desired.Name, err)
	}
	logger.Info("Updated the admission webhook registration")
	return nil
}

// registrationPatch is the JSON merge patch that sets desired's labels
// (others are kept) and replaces the webhooks. The resourceVersion makes
// it fail with a conflict if the object changed since it was read, as an
// update would.
func registrationPatch(resourceVersion string, desired *admissionregistrationv1.MutatingWebhookConfiguration) ([]byte, error) {
	type meta struct {
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels,omitempty"`
	}
	b, err := json.Marshal(struct {
		Metadata meta                                      `json:"metadata"`
		Webhooks []admissionregistrationv1.MutatingWebhook `json:"webhooks"`
	}{meta{resourceVersion, desired.Labels}, desired.Webhooks})
	if err != nil {
		return nil, fmt.Errorf("encode the registration patch: %w", err)
	}
	return b, nil
}

// WebhooksEqual compares what Build sets; fields the API server defaults and
// we leave unset (matchConditions) would otherwise cause an update on
// every start.
func WebhooksEqual(a, b []admissionregistrationv1.MutatingWebhook) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i].DeepCopy(), b[i].DeepCopy()
		x.MatchConditions, y.MatchConditions = nil, nil
		if !bytes.Equal(x.ClientConfig.CABundle, y.ClientConfig.CABundle) {
			return false
		}
		x.ClientConfig.CABundle, y.ClientConfig.CABundle = nil, nil
		if x.ClientConfig.Service != nil && x.ClientConfig.Service.Port == nil {
			x.ClientConfig.Service.Port = ptr.To[int32](443)
		}
		if y.ClientConfig.Service != nil && y.ClientConfig.Service.Port == nil {
			y.ClientConfig.Service.Port = ptr.To[int32](443)
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// BundleSource provides the CA bundle to register and announces changes.
// certs.SelfManaged and certs.BundleWatcher implement it.
type BundleSource interface {
	CABundle() []byte
	Changed() <-chan struct{}
}

// Registrar keeps the registration in line with a changing CA bundle: it
// applies Config with the source's bundle at start, whenever the source
// announces a change, and every Resync (which also restores a registration
// someone else edited). Apply writes only what differs.
type Registrar struct {
	Client admissionclient.MutatingWebhookConfigurationInterface
	// Config is the registration; its CABundle is taken from Source.
	Config Config
	Source BundleSource
	Clock  clock.WithTicker
	// Resync re-applies periodically; RetryInterval re-applies after a
	// failure.
	Resync        time.Duration
	RetryInterval time.Duration
}

// Sync applies the registration with the current bundle, retrying on
// conflicts with another replica's write.
func (r *Registrar) Sync(ctx context.Context) error {
	c := r.Config
	c.CABundle = r.Source.CABundle()
	if err := c.Validate(); err != nil {
		return fmt.Errorf("webhook registration: %w", err)
	}
	desired := Build(&c)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		return Apply(ctx, r.Client, desired)
	})
}

// Run re-applies on every bundle change and every Resync until ctx ends.
// Failures are logged and retried after RetryInterval: a registration
// that cannot be written must not stop the webhook from serving.
func (r *Registrar) Run(ctx context.Context) {
	logger := klog.FromContext(ctx).WithValues("mutatingWebhookConfiguration", r.Config.Name)
	resync := r.Clock.NewTicker(r.Resync)
	defer resync.Stop()
	var retryC <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.Source.Changed():
			logger.Info("CA bundle changed; updating the webhook registration")
		case <-resync.C():
		case <-retryC:
		}
		retryC = nil
		if err := r.Sync(ctx); err != nil {
			logger.Error(err, "Updating the webhook registration; retrying", "after", r.RetryInterval)
			retryC = r.Clock.After(r.RetryInterval)
		}
	}
}
