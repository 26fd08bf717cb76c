package register

import (
	"context"
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func serviceConfig() *Config {
	return &Config{
		Name:               DefaultConfigName,
		Service:            &admissionregistrationv1.ServiceReference{Namespace: "aware-system", Name: "aware-admission-controller", Path: ptr.To("/mutate-pods"), Port: ptr.To[int32](443)},
		CABundle:           []byte("ca"),
		FailurePolicy:      admissionregistrationv1.Ignore,
		TimeoutSeconds:     3,
		ExcludedNamespaces: []string{"kube-system", "aware-system"},
	}
}

func TestValidate(t *testing.T) {
	if err := serviceConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := serviceConfig()
	c.URL = "https://127.0.0.1:8443/mutate-pods"
	c.CABundle = nil
	c.TimeoutSeconds = 60
	c.FailurePolicy = "Sometimes"
	err := c.Validate()
	for _, want := range []string{"exactly one", "CA bundle", "timeout 60s", "failure policy"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to mention %q", err, want)
		}
	}
}

func TestBuildSelectors(t *testing.T) {
	w := Build(serviceConfig()).Webhooks[0]
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.TimeoutSeconds != 3 || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
		t.Fatalf("unsafe defaults: %+v", w)
	}
	if len(w.Rules) != 1 || w.Rules[0].Operations[0] != admissionregistrationv1.Create || w.Rules[0].Resources[0] != "pods" {
		t.Fatalf("rules: %+v", w.Rules)
	}
	ns, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := metav1.LabelSelectorAsSelector(w.ObjectSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		namespace string
		podLabels labels.Set
		called    bool
	}{
		{"workload namespace", "shop", labels.Set{"app": "web"}, true},
		{"kube-system", "kube-system", nil, false},
		{"our own namespace", "aware-system", nil, false},
		{"opted-out pod", "shop", labels.Set{OptOutLabel: OptOutValue}, false},
	} {
		got := ns.Matches(labels.Set{namespaceNameLabel: tc.namespace}) && obj.Matches(tc.podLabels)
		if got != tc.called {
			t.Errorf("%s: webhook called = %v, want %v", tc.name, got, tc.called)
		}
	}
	// An extra namespace selector narrows the webhook; it cannot bring an
	// excluded namespace back.
	one := serviceConfig()
	one.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"shop", "aware-system"}}}}
	narrowed, err := metav1.LabelSelectorAsSelector(Build(one).Webhooks[0].NamespaceSelector)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		namespace string
		called    bool
	}{{"shop", true}, {"other", false}, {"aware-system", false}, {"kube-system", false}} {
		if got := narrowed.Matches(labels.Set{namespaceNameLabel: tc.namespace}); got != tc.called {
			t.Errorf("with a namespace selector, namespace %s: webhook called = %v, want %v", tc.namespace, got, tc.called)
		}
	}
	if len(one.NamespaceSelector.MatchExpressions) != 1 {
		t.Errorf("Build modified the caller's selector: %+v", one.NamespaceSelector)
	}
	url := serviceConfig()
	url.Service, url.URL = nil, "https://127.0.0.1:8443/mutate-pods"
	if cc := Build(url).Webhooks[0].ClientConfig; cc.URL == nil || *cc.URL != url.URL || cc.Service != nil {
		t.Fatalf("URL mode: %+v", cc)
	}
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	mwc := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	desired := Build(serviceConfig())
	if err := Apply(ctx, mwc, desired); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, mwc, desired); err != nil {
		t.Fatal(err)
	}
	var writes int
	for _, a := range client.Actions() {
		if v := a.GetVerb(); v == "update" || v == "patch" {
			writes++
		}
	}
	if writes != 0 {
		t.Fatalf("an unchanged registration was written %d times", writes)
	}
	// A rotated CA must reach the API server; a foreign label survives.
	cur, _ := mwc.Get(ctx, DefaultConfigName, metav1.GetOptions{})
	cur.Labels["team"] = "platform"
	if _, err := mwc.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := serviceConfig()
	c.CABundle = []byte("new ca")
	if err := Apply(ctx, mwc, Build(c)); err != nil {
		t.Fatal(err)
	}
	got, _ := mwc.Get(ctx, DefaultConfigName, metav1.GetOptions{})
	if string(got.Webhooks[0].ClientConfig.CABundle) != "new ca" || got.Labels["team"] != "platform" {
		t.Fatalf("after update: ca %q labels %v", got.Webhooks[0].ClientConfig.CABundle, got.Labels)
	}
}

// TestApplyNeedsOnlyGetAndPatch: with the registration shipped in the
// manifests, Apply reads and patches it and never updates or creates; when
// it is missing and create is forbidden, the error says to apply the
// manifests.
func TestApplyNeedsOnlyGetAndPatch(t *testing.T) {
	ctx := context.Background()
	shipped := Build(serviceConfig())
	shipped.Webhooks[0].ClientConfig.CABundle = nil
	client := fake.NewClientset(shipped)
	mwc := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := Apply(ctx, mwc, Build(serviceConfig())); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range client.Actions() {
		verbs = append(verbs, a.GetVerb())
	}
	if strings.Join(verbs, ",") != "get,patch" {
		t.Errorf("verbs %v, want get then patch", verbs)
	}
	got, err := mwc.Get(ctx, DefaultConfigName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Webhooks[0].ClientConfig.CABundle) != "ca" {
		t.Errorf("caBundle %q after the patch", got.Webhooks[0].ClientConfig.CABundle)
	}

	empty := fake.NewClientset()
	empty.PrependReactor("create", "mutatingwebhookconfigurations", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}, DefaultConfigName, errors.New("RBAC"))
	})
	err = Apply(ctx, empty.AdmissionregistrationV1().MutatingWebhookConfigurations(), Build(serviceConfig()))
	if err == nil || !strings.Contains(err.Error(), "apply it from the manifests") {
		t.Errorf("missing registration without create: %v", err)
	}
}
