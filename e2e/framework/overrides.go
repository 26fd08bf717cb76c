package framework

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Override is one flag in which a component run by the e2e may differ from
// the install's container args (Workload.Args). Every other argument is
// the manifests': a flag added to or removed from deploy/ reaches the e2e
// as it is, and a flag the e2e sets is in Overrides, with the reason.
type Override struct {
	// Component is the container's name in deploy/; empty for any.
	Component string
	// Flag without its dashes.
	Flag string
	// Listener, for a flag that carries an address or port: which of the
	// listeners of component Of (Component when empty) it names: metrics,
	// health, grpc or webhook. A host with no pod network (loopback
	// processes, the real node's host network) gives each its own port.
	Listener, Of string
	// Format of a Listener's value: "addr" (127.0.0.1:PORT), "port"
	// (PORT) or "endpoint" (the manifest's host with PORT).
	Format string
	// Process is what a local process gets when its test sets none; nil
	// keeps the manifest's value (and adds nothing the manifest lacks).
	Process func(l *Loopback) string
	// Replaces lists the manifest's flags this one stands in for: they are
	// dropped when it is set.
	Replaces []string
	// Why the e2e differs from the install here.
	Why string
}

// Loopback is what a local process gets in place of a pod's surroundings.
type Loopback struct {
	// Kubeconfig holds a token of the Deployment's ServiceAccount for the
	// testbed's apiserver.
	Kubeconfig string
	// Addr returns the 127.0.0.1:PORT the process listens on for a
	// listener; the same one for each call with the same listener.
	Addr func(listener string) string
	// TempDir returns a new directory, removed when the test ends.
	TempDir func() string
}

func addr(listener string) func(*Loopback) string {
	return func(l *Loopback) string { return l.Addr(listener) }
}

// Overrides is the one list of the e2e's departures from deploy/: those a
// local process needs on loopback (Process set, applied to every process),
// those the real node needs (Listener), and the knobs a test may turn
// (neither: the manifest's value unless the test passes the flag). A test
// that passes a flag not listed here fails, so that no e2e-only flag hides
// in a test.
var Overrides = []Override{
	// Loopback: no pod, no Service, no in-cluster config.
	{Flag: "kubeconfig", Process: func(l *Loopback) string { return l.Kubeconfig },
		Why: "the testbed's apiserver, with a token of the Deployment's ServiceAccount (the in-cluster config needs a pod)"},
	{Flag: "metrics-bind-address", Listener: "metrics", Format: "addr", Process: addr("metrics"),
		Why: "the manifests' :8080 is one port for every component; processes and host-network pods share one network"},
	{Flag: "health-bind-address", Listener: "health", Format: "addr", Process: addr("health"),
		Why: "as metrics-bind-address (:8081)"},
	{Flag: "v", Process: func(*Loopback) string { return "2" },
		Why: "logs detailed enough to read a failed test's story in its dumped logs"},
	{Component: "rl-agent", Flag: "listen-address", Listener: "grpc", Format: "addr", Process: addr("grpc"),
		Why: "as metrics-bind-address (:9090); a test that starts the recommender after the agent passes the address it picked"},
	{Component: "rl-agent", Flag: "state-dir", Process: func(l *Loopback) string { return l.TempDir() },
		Why: "the manifests' path is the PersistentVolumeClaim's mount point; a test that restarts the agent passes its own directory"},
	{Component: "recommender", Flag: "rl-agent-endpoint", Listener: "grpc", Of: "rl-agent", Format: "endpoint", Process: func(*Loopback) string { return "" },
		Why: "the manifests' Service name resolves in a cluster only: no agent unless the test starts one and passes its address"},
	{Component: "admission-controller", Flag: "webhook-bind-address", Listener: "webhook", Format: "addr", Process: addr("webhook"),
		Why: "as metrics-bind-address (:8443)"},
	{Component: "admission-controller", Flag: "webhook-service-port", Listener: "webhook", Format: "port",
		Why: "the real node's webhook Service (an ExternalName for localhost) is reached on the webhook's own port"},
	{Component: "admission-controller", Flag: "webhook-url", Replaces: []string{"webhook-service-name", "webhook-service-port"},
		Process: func(l *Loopback) string { return "https://" + l.Addr("webhook") + "/mutate-pods" },
		Why:     "the apiserver calls a process on loopback by URL: there is no Service in front of it"},
	{Component: "recommender", Flag: "prometheus-address", Why: "the testbed's Prometheus, for the tests that read latency SLOs and history"},

	// Isolation: tests share one control plane, each in its own namespace,
	// with Leases, Secrets and webhook registrations of their own (granted
	// by GrantRenamed the rights deploy/ grants on the shipped names).
	{Flag: "namespace", Why: "each test watches its own namespace (the admission controller: its registration's namespace selector)"},
	{Flag: "leader-elect", Why: "one recommender or updater per test, without leader election where a local process could not be restarted by a kubelet after losing its Lease"},
	{Flag: "leader-elect-resource-namespace", Why: "isolation: the leader Lease in the test's namespace (TestRecommenderLeaderElection)"},
	{Flag: "leader-elect-resource-name", Why: "isolation: a leader Lease per test"},
	{Component: "updater", Flag: "admission-lease-name", Why: "isolation: the heartbeat Lease of the test's admission controller"},
	{Component: "admission-controller", Flag: "cert-secret-name", Why: "isolation: a certificate Secret per test"},
	{Component: "admission-controller", Flag: "heartbeat-lease-name", Why: "isolation: a heartbeat Lease per test"},
	{Component: "admission-controller", Flag: "webhook-config-name", Why: "isolation: a webhook registration per test"},
	{Component: "admission-controller", Flag: "webhook-namespace-selector", Why: "isolation: the webhook sees only the test's namespace"},

	// Time: the manifests' periods are minutes, a test has a few.
	{Flag: "leader-elect-lease-duration", Why: "a leader takeover within the test"},
	{Flag: "leader-elect-renew-deadline", Why: "a leader takeover within the test"},
	{Flag: "leader-elect-retry-period", Why: "a leader takeover within the test"},
	{Component: "recommender", Flag: "recommender-interval", Why: "many loops within a test"},
	{Component: "recommender", Flag: "checkpoints-interval", Why: "a checkpoint within the test (TestRecommenderCheckpoints), or none in its way"},
	{Component: "recommender", Flag: "rival-scan-interval", Why: "a deleted rival autoscaler noticed within the test"},
	{Component: "recommender", Flag: "status-refresh-interval", Why: "a live recommender told from a dead one within seconds"},
	{Component: "recommender", Flag: "status-write-timeout", Why: "a status write abandoned within an injected outage"},
	{Component: "recommender", Flag: "api-failure-warning", Why: "APIReadFailing and StatusWriteFailing recorded within an injected outage"},
	{Component: "recommender", Flag: "prometheus-window", Why: "an SLO read from the few minutes a test runs"},
	{Component: "recommender", Flag: "history-length", Why: "history fetched from the few minutes a test runs"},
	{Component: "recommender", Flag: "history-resolution", Why: "history fetched from the few minutes a test runs"},
	{Component: "recommender", Flag: "rl-agent-timeout", Why: "an injected slow agent times out within the test"},
	{Component: "recommender", Flag: "rl-agent-failure-threshold", Why: "the agent's circuit breaker opens within the test"},
	{Component: "recommender", Flag: "rl-agent-cooldown", Why: "a restarted agent is called again within the test"},
	{Component: "updater", Flag: "update-interval", Why: "many loops within a test"},
	{Component: "admission-controller", Flag: "heartbeat-interval", Why: "a stopped admission controller noticed within the test"},
	{Component: "admission-controller", Flag: "heartbeat-lease-duration", Why: "a stopped admission controller noticed within the test"},
	{Component: "rl-agent", Flag: "checkpoint-interval", Why: "what was learnt before a kill is on disk for the restart"},

	// Scenario: what a test is about.
	{Component: "recommender", Flag: "rl-agent-tls-mode", Why: "TestAgentFaults puts a plaintext fault-injecting proxy on loopback between the recommender and the agent (the proxy speaks mutual TLS to the agent)"},
	{Component: "updater", Flag: "min-replicas", Why: "TestEvictionAndWebhook: the updater asks for more evictions than the PodDisruptionBudget allows, so that the PDB is what holds"},
	{Component: "updater", Flag: "eviction-rate-limit", Why: "TestEvictionAndWebhook: as min-replicas"},
	{Component: "updater", Flag: "eviction-rate-burst", Why: "TestEvictionAndWebhook: as min-replicas"},
	{Component: "updater", Flag: "workload-eviction-rate-limit", Why: "TestEvictionAndWebhook: as min-replicas"},
	{Component: "updater", Flag: "workload-eviction-rate-burst", Why: "TestEvictionAndWebhook: as min-replicas"},
	{Component: "rl-agent", Flag: "action-space", Why: "the tests of the agent's own answers use the paper's actions"},
	{Component: "rl-agent", Flag: "initial-checkpoint", Why: "TestRLAgentResidual serves a policy trained in the test"},
	{Component: "rl-agent", Flag: "ensemble-checkpoints", Why: "TestRLAgentResidual serves an ensemble trained in the test"},
	{Component: "rl-agent", Flag: "ensemble-quorum", Why: "TestRLAgentResidual serves an ensemble trained in the test"},
	{Flag: "profiling", Why: "the soak reads each component's heap profile at the end of every segment between restarts, to name what a rise in memory is made of"},
	{Component: "rl-agent", Flag: "workload-ttl", Why: "TestUpgrade: the recorded fixture's workloads last called when it was recorded, longer ago than the default TTL"},
}

// lookup returns component's override of flag.
func lookup(component, flag string) (Override, bool) {
	for _, o := range Overrides {
		if o.Flag == flag && (o.Component == "" || o.Component == component) {
			return o, true
		}
	}
	return Override{}, false
}

// flagName returns the name of a "--name=value" or "--name" argument, and
// false for a positional one (a subcommand).
func flagName(arg string) (string, bool) {
	if !strings.HasPrefix(arg, "--") {
		return "", false
	}
	name, _, _ := strings.Cut(arg[2:], "=")
	return name, true
}

// setFlag returns args with every occurrence of flag replaced by value,
// at the first one's place, or appended if args lack it; dropped lists
// flags removed.
func setFlag(args []string, flag, value string, dropped []string) []string {
	out := make([]string, 0, len(args)+1)
	placed := false
	for _, a := range args {
		name, ok := flagName(a)
		switch {
		case ok && name == flag:
			if !placed {
				out = append(out, "--"+flag+"="+value)
				placed = true
			}
		case ok && slices.Contains(dropped, name):
		default:
			out = append(out, a)
		}
	}
	if !placed {
		out = append(out, "--"+flag+"="+value)
	}
	return out
}

// ProcessArgs returns the arguments of w run as a local process: the
// manifests' args, then each Override of w's component: the test's value
// from set ("--flag=value" or "--flag" for true) if it passes one, else
// its Process value. A flag in set that Overrides does not list for the
// component is an error. The manifests' args must spell each flag as
// --flag=value or --flag (as deploy/ does), so that one can be told from a
// positional argument.
func ProcessArgs(w Workload, l *Loopback, set []string) ([]string, error) {
	for i, a := range w.Args {
		if a == "--" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--")) {
			return nil, fmt.Errorf("%s: argument %q: the e2e reads only --flag=value, --flag and positional arguments", w.Component, a)
		}
		if name, ok := flagName(a); ok && !strings.Contains(a, "=") && i+1 < len(w.Args) && !strings.HasPrefix(w.Args[i+1], "-") {
			return nil, fmt.Errorf("%s: write --%s %s as --%s=%s: the e2e cannot tell a flag's value from a positional argument", w.Component, name, w.Args[i+1], name, w.Args[i+1])
		}
	}
	values := map[string]string{}
	for _, a := range set {
		name, ok := flagName(a)
		if !ok {
			return nil, fmt.Errorf("%s: test argument %q is not a --flag", w.Component, a)
		}
		if _, ok := lookup(w.Component, name); !ok {
			return nil, fmt.Errorf("%s: the test sets --%s, which is not in framework.Overrides (e2e/framework/overrides.go): add it there, with why the e2e departs from deploy/", w.Component, name)
		}
		v := "true"
		if _, after, ok := strings.Cut(a, "="); ok {
			v = after
		}
		values[name] = v
	}
	args := slices.Clone(w.Args)
	for _, o := range Overrides {
		if o.Component != "" && o.Component != w.Component {
			continue
		}
		v, ok := values[o.Flag]
		if !ok && o.Process != nil {
			v, ok = o.Process(l), true
		}
		if ok {
			args = setFlag(args, o.Flag, v, o.Replaces)
		}
	}
	return args, nil
}

// NodeArgs returns the manifests' args of component with each Listener
// flag's port rewritten to port(component, listener), for pods that share
// the host's network. Nothing else changes; metrics-bind-address and
// health-bind-address must be there, so that a renamed flag fails here
// rather than leaving two pods on one port.
func NodeArgs(component string, args []string, port func(component, listener string) int) ([]string, error) {
	out := slices.Clone(args)
	seen := map[string]bool{}
	for i, a := range out {
		name, ok := flagName(a)
		if !ok {
			continue
		}
		o, ok := lookup(component, name)
		if !ok || o.Listener == "" {
			continue
		}
		of := o.Of
		if of == "" {
			of = component
		}
		p := strconv.Itoa(port(of, o.Listener))
		var v string
		switch o.Format {
		case "addr":
			v = net.JoinHostPort("127.0.0.1", p)
		case "port":
			v = p
		case "endpoint":
			_, cur, _ := strings.Cut(a, "=")
			host, _, err := net.SplitHostPort(cur)
			if err != nil {
				return nil, fmt.Errorf("%s: --%s: %w", component, name, err)
			}
			v = net.JoinHostPort(host, p)
		default:
			return nil, fmt.Errorf("override --%s: unknown format %q", name, o.Format)
		}
		out[i] = "--" + name + "=" + v
		seen[name] = true
	}
	for _, f := range []string{"metrics-bind-address", "health-bind-address"} {
		if !seen[f] {
			return nil, fmt.Errorf("%s: no --%s in args %v", component, f, args)
		}
	}
	return out, nil
}
