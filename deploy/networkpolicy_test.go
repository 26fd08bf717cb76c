package deploy

import (
	"net"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// peer is the source of a connection: a pod (with its namespace's
// labels) or an address outside the pod network (pod nil).
type peer struct {
	namespace string
	nsLabels  map[string]string
	pod       map[string]string
	ip        string
}

func selects(sel *metav1.LabelSelector, l map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

// peerMatches is NetworkPolicy's reading of one from-entry.
func peerMatches(p networkingv1.NetworkPolicyPeer, policyNS string, src peer) bool {
	if p.IPBlock != nil {
		_, cidr, err := net.ParseCIDR(p.IPBlock.CIDR)
		ip := net.ParseIP(src.ip)
		if err != nil || ip == nil || !cidr.Contains(ip) {
			return false
		}
		for _, e := range p.IPBlock.Except {
			if _, ex, err := net.ParseCIDR(e); err == nil && ex.Contains(ip) {
				return false
			}
		}
		return true
	}
	if src.pod == nil {
		return false
	}
	if p.NamespaceSelector != nil {
		if !selects(p.NamespaceSelector, src.nsLabels) {
			return false
		}
	} else if src.namespace != policyNS {
		return false
	}
	return p.PodSelector == nil || selects(p.PodSelector, src.pod)
}

// allowed says whether src may connect to the named port of a pod of d,
// under the policies: allowed when no policy selects the pod, else when
// one of their ingress rules admits the source on that port.
func allowed(policies []*networkingv1.NetworkPolicy, d *appsv1.Deployment, port string, src peer) bool {
	podLabels := d.Spec.Template.Labels
	var number int32
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == port {
				number = p.ContainerPort
			}
		}
	}
	selected := false
	for _, np := range policies {
		if np.Namespace != d.Namespace || !selects(&np.Spec.PodSelector, podLabels) {
			continue
		}
		selected = true
		for _, rule := range np.Spec.Ingress {
			portOK := len(rule.Ports) == 0
			for _, p := range rule.Ports {
				if p.Port == nil || p.Port.StrVal == port || (p.Port.StrVal == "" && p.Port.IntVal == number) {
					portOK = true
				}
			}
			fromOK := len(rule.From) == 0
			for _, f := range rule.From {
				if peerMatches(f, np.Namespace, src) {
					fromOK = true
				}
			}
			if portOK && fromOK {
				return true
			}
		}
	}
	return !selected
}

// TestNetworkPolicies reads the shipped policies as a network plugin
// would and checks who reaches which port.
func TestNetworkPolicies(t *testing.T) {
	var policies []*networkingv1.NetworkPolicy
	deployments := map[string]*appsv1.Deployment{}
	for _, f := range manifests(t, ".") {
		for _, obj := range objects(t, f) {
			switch o := obj.(type) {
			case *networkingv1.NetworkPolicy:
				policies = append(policies, o)
			case *appsv1.Deployment:
				deployments[o.Name] = o
			}
		}
	}
	system := map[string]string{"kubernetes.io/metadata.name": "aware-system", "app.kubernetes.io/part-of": "aware"}
	pod := func(name string) peer {
		return peer{namespace: "aware-system", nsLabels: system, pod: map[string]string{"app.kubernetes.io/name": name}, ip: "10.244.1.10"}
	}
	recommender, updater := pod("aware-recommender"), pod("aware-updater")
	stranger := pod("something-else")
	shop := peer{namespace: "shop", nsLabels: map[string]string{"kubernetes.io/metadata.name": "shop"}, pod: map[string]string{"app.kubernetes.io/name": "aware-recommender"}, ip: "10.244.2.20"}
	monitoring := peer{namespace: "monitoring", nsLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring", "aware.dev/monitoring": "true"}, pod: map[string]string{"app": "prometheus"}, ip: "10.244.3.30"}
	unlabelledMonitoring := monitoring
	unlabelledMonitoring.nsLabels = map[string]string{"kubernetes.io/metadata.name": "monitoring"}
	apiServer := peer{ip: "10.0.0.5"} // a control-plane address, outside the pod network

	for _, tc := range []struct {
		name       string
		deployment string
		port       string
		src        peer
		want       bool
	}{
		{"the recommender calls the agent", "aware-rl-agent", "grpc", recommender, true},
		{"the updater may not call the agent", "aware-rl-agent", "grpc", updater, false},
		{"another pod of aware-system may not call the agent", "aware-rl-agent", "grpc", stranger, false},
		{"a pod elsewhere labelled like the recommender may not call the agent", "aware-rl-agent", "grpc", shop, false},
		{"monitoring may not call the agent", "aware-rl-agent", "grpc", monitoring, false},
		{"an address outside the pod network may not call the agent", "aware-rl-agent", "grpc", apiServer, false},
		{"the API server calls the webhook", "aware-admission-controller", "webhook", apiServer, true},
		{"a pod may not call the webhook", "aware-admission-controller", "webhook", shop, false},
		{"the recommender may not call the webhook", "aware-admission-controller", "webhook", recommender, false},
		{"monitoring scrapes the agent", "aware-rl-agent", "metrics", monitoring, true},
		{"monitoring scrapes the webhook", "aware-admission-controller", "metrics", monitoring, true},
		{"monitoring scrapes the recommender", "aware-recommender", "metrics", monitoring, true},
		{"monitoring scrapes the updater", "aware-updater", "metrics", monitoring, true},
		{"an unlabelled namespace may not scrape", "aware-recommender", "metrics", unlabelledMonitoring, false},
		{"a pod elsewhere may not scrape", "aware-rl-agent", "metrics", shop, false},
		{"nothing reaches the recommender's health port from pods", "aware-recommender", "health", shop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := deployments[tc.deployment]
			if d == nil {
				t.Fatalf("no Deployment %s", tc.deployment)
			}
			if got := allowed(policies, d, tc.port, tc.src); got != tc.want {
				t.Fatalf("allowed = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("every component's pods are selected", func(t *testing.T) {
		for name, d := range deployments {
			if allowed(policies, d, "no-such-port", stranger) {
				t.Errorf("%s: a pod of aware-system reaches any port: no policy selects its pods", name)
			}
		}
	})
}
