//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/aware-k8s/aware/admission-controller/pkg/patch"
	"github.com/aware-k8s/aware/admission-controller/pkg/register"
	"github.com/aware-k8s/aware/e2e/framework"
	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	"github.com/aware-k8s/aware/pkg/kube/certs"
)

// sizedMPA is an MPA for Deployment app in update mode mode with replicas
// held fixed (min = max), so only the vertical half acts. Requests are
// capped at 100m of CPU and 256Mi of memory: pods created with more are
// outside the recommendation's bounds, which makes the updater act on them
// at once (no drift age to wait for).
func sizedMPA(app string, mode v1alpha1.UpdateMode, replicas int32) mpaManifest {
	return mpaManifest{name: app, mode: mode, maxCPU: "100m", maxMemory: "256Mi", minReplicas: replicas, maxReplicas: replicas}
}

// oversizedDeployment is smokeDeployment with requests (300m, 512Mi) above
// sizedMPA's maxAllowed and limits at a fixed ratio to them.
func oversizedDeployment(app string, replicas int32) *appsv1.Deployment {
	d := smokeDeployment(app, replicas)
	c := &d.Spec.Template.Spec.Containers[0]
	c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("300m")
	c.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("900m")
	c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("512Mi")
	c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
	return d
}

// createSizedMPA creates sizedMPA for app and returns a getter for it.
func createSizedMPA(t *testing.T, ns, app string, mode v1alpha1.UpdateMode, replicas int32) func(context.Context) (*v1alpha1.MultidimPodAutoscaler, error) {
	t.Helper()
	return createMPA(t, ns, sizedMPA(app, mode, replicas))
}

// waitForRecommendation waits for the recommender to publish a
// recommendation for the MPA and returns it.
func waitForRecommendation(t *testing.T, rec *component, getMPA func(context.Context) (*v1alpha1.MultidimPodAutoscaler, error)) *v1alpha1.MultidimPodAutoscaler {
	t.Helper()
	var last *v1alpha1.MultidimPodAutoscaler
	framework.Eventually(t, 3*time.Minute, "a recommendation in the MPA's status", func(ctx context.Context) (bool, error) {
		rec.running(t)
		m, err := getMPA(ctx)
		if err != nil {
			return false, err
		}
		last = m
		if m.Status.Recommendation == nil || len(m.Status.Recommendation.ContainerRecommendations) == 0 {
			return false, fmt.Errorf("no recommendation; conditions %+v", m.Status.Conditions)
		}
		return true, nil
	})
	cr := last.Status.Recommendation.ContainerRecommendations[0]
	t.Logf("recommendation for %s: target %s/%s, bounds cpu [%s, %s] memory [%s, %s]", cr.ContainerName,
		cr.Target.Cpu(), cr.Target.Memory(), cr.LowerBound.Cpu(), cr.UpperBound.Cpu(), cr.LowerBound.Memory(), cr.UpperBound.Memory())
	return last
}

// podWatch follows a namespace's pods through an informer and records,
// event by event, the fewest available pods (Running, Ready, not being
// deleted) seen once armed, and which pods were deleted through the
// Eviction API (their DisruptionTarget condition).
type podWatch struct {
	mu        sync.Mutex
	available map[types.UID]bool
	armed     bool
	min       int
	evicted   map[types.UID]bool
}

func watchPods(t *testing.T, ns, selector string) *podWatch {
	t.Helper()
	w := &podWatch{available: map[types.UID]bool{}, evicted: map[types.UID]bool{}, min: math.MaxInt}
	f := informers.NewSharedInformerFactoryWithOptions(tb.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	inf := f.Core().V1().Pods().Informer()
	// One listener gets the notifications in order, so the map follows
	// every intermediate state, not only the ones a poll happens to see.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.observe(o, false) },
		UpdateFunc: func(_, o any) { w.observe(o, false) },
		DeleteFunc: func(o any) { w.observe(o, true) },
	}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	return w
}

func (w *podWatch) observe(o any, deleted bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if deleted {
		delete(w.available, p.UID)
	} else {
		w.available[p.UID] = p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && framework.PodReady(p)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue && c.Reason == "EvictionByEvictionAPI" {
			w.evicted[p.UID] = true
		}
	}
	if w.armed {
		w.min = min(w.min, w.countLocked())
	}
}

func (w *podWatch) countLocked() int {
	n := 0
	for _, a := range w.available {
		if a {
			n++
		}
	}
	return n
}

// arm starts recording the minimum from the current count on.
func (w *podWatch) arm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.armed, w.min = true, w.countLocked()
}

func (w *podWatch) minAvailable() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.min
}

func (w *podWatch) wasEvicted(uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.evicted[uid]
}

// admissionNames are the objects an admission controller of one test owns:
// all include the test namespace, so tests never share them.
type admissionNames struct {
	secret, lease, webhookConfig, url string
}

// startAdmissionController runs the admission controller as
// aware-system/aware-admission-controller with a self-managed certificate
// in a Secret of aware-system, a heartbeat Lease renewed every 2s, and its
// own webhook registration in URL mode pointing at its loopback listener
// and selecting only namespace ns.
//
// The admission controller leaves its registration, Secret and Lease in
// place when it stops (several replicas share them, and failurePolicy Ignore
// makes a registration without a server harmless). The cleanup registered
// here therefore checks that they outlived the process, then deletes all
// three and checks they are gone.
func startAdmissionController(t *testing.T, ns string, args ...string) (*component, admissionNames) {
	t.Helper()
	addr := freeAddr(t)
	n := admissionNames{
		secret:        "aware-admission-controller-certs-" + ns,
		lease:         "aware-admission-controller-" + ns,
		webhookConfig: "aware-admission-controller-" + ns,
		url:           "https://" + addr + "/mutate-pods",
	}
	tb.GrantRenamed(t, "", "aware:admission-controller", "aware-system", "aware-admission-controller", "aware-e2e:admission-controller:"+ns,
		map[string]string{"aware-admission-controller": n.webhookConfig})
	tb.GrantRenamed(t, "aware-system", "aware:admission-controller", "aware-system", "aware-admission-controller", "aware-e2e:admission-controller:"+ns,
		map[string]string{"aware-admission-controller": n.lease, "aware-admission-controller-certs": n.secret})
	whc := tb.Client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	secrets := tb.Client.CoreV1().Secrets("aware-system")
	leases := tb.Client.CoordinationV1().Leases("aware-system")
	// The registration ships with the install, and the admission controller
	// may only get and patch it: create an empty one, as the manifests
	// would (without webhooks, so that nothing calls a webhook that is not
	// there yet), for it to fill in.
	if _, err := whc.Create(context.Background(), &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: n.webhookConfig}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the registration %s: %v", n.webhookConfig, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := whc.Get(ctx, n.webhookConfig, metav1.GetOptions{}); err != nil {
			t.Errorf("the webhook registration should outlive the admission controller (it is documented to stay): %v", err)
		}
		for what, del := range map[string]func() error{
			"MutatingWebhookConfiguration " + n.webhookConfig: func() error { return whc.Delete(ctx, n.webhookConfig, metav1.DeleteOptions{}) },
			"Secret aware-system/" + n.secret:                 func() error { return secrets.Delete(ctx, n.secret, metav1.DeleteOptions{}) },
			"Lease aware-system/" + n.lease:                   func() error { return leases.Delete(ctx, n.lease, metav1.DeleteOptions{}) },
		} {
			if err := del(); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s: %v", what, err)
			}
		}
		if _, err := whc.Get(ctx, n.webhookConfig, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("MutatingWebhookConfiguration %s still there after cleanup: %v", n.webhookConfig, err)
		}
		if _, err := secrets.Get(ctx, n.secret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s still there after cleanup: %v", n.secret, err)
		}
		if _, err := leases.Get(ctx, n.lease, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("Lease %s still there after cleanup: %v", n.lease, err)
		}
	})
	// The self-managed certificate, the self-registration and the
	// heartbeat of deploy/, under this test's names and reached by URL.
	// args add to these (the soak's --profiling).
	ac := startComponent(t, "admission-controller", append([]string{
		"--webhook-bind-address=" + addr,
		"--cert-secret-name=" + n.secret,
		"--webhook-config-name=" + n.webhookConfig,
		"--webhook-url=" + n.url,
		"--webhook-namespace-selector=kubernetes.io/metadata.name=" + ns,
		"--heartbeat-lease-name=" + n.lease,
		"--heartbeat-interval=2s",
		"--heartbeat-lease-duration=10s",
	}, args...)...)
	return ac, n
}

// TestEvictionAndWebhook runs the vertical loop through eviction: the
// recommender recommends from emulated usage, the updater evicts the
// oversized pods through the Eviction API while a PodDisruptionBudget
// holds, and the admission controller (a local process with a
// self-managed certificate and its own registration) sizes the
// replacements.
func TestEvictionAndWebhook(t *testing.T) {
	tb.DumpLogsOnFailure(t)
	requireAWARE(t)
	ctx := context.Background()
	ns := tb.CreateNamespace(t, "evict")
	const (
		app      = "evictee"
		replicas = 4
		// minAvailable of the PDB: one pod at a time.
		floor = replicas - 1
	)
	selector := "app=" + app

	ac, names := startAdmissionController(t, ns)

	var mwc *admissionregistrationv1.MutatingWebhookConfiguration
	if !t.Run("registration, certificate and heartbeat", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		framework.Eventually(t, 30*time.Second, "MutatingWebhookConfiguration "+names.webhookConfig, func(ctx context.Context) (bool, error) {
			ac.running(t)
			var err error
			mwc, err = tb.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, names.webhookConfig, metav1.GetOptions{})
			// Created empty by the test; filled in by the admission
			// controller's patch.
			return err == nil && len(mwc.Webhooks) > 0, err
		})
		sec, err := tb.Client.CoreV1().Secrets("aware-system").Get(ctx, names.secret, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("certificate Secret: %v", err)
		}
		caPEM := sec.Data[certs.SecretCABundleKey]
		if len(caPEM) == 0 || len(sec.Data[corev1.TLSCertKey]) == 0 || len(sec.Data[corev1.TLSPrivateKeyKey]) == 0 || len(sec.Data[certs.SecretCAKeyKey]) == 0 {
			t.Fatalf("Secret %s has keys %v, want %s, %s, %s and %s", names.secret, keys(sec.Data), certs.SecretCABundleKey, certs.SecretCAKeyKey, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		}
		if sec.Labels[certs.ManagedByLabel] != certs.ManagedByValue {
			t.Errorf("Secret labels %v, want %s=%s", sec.Labels, certs.ManagedByLabel, certs.ManagedByValue)
		}
		// The serving certificate is valid for the loopback address the
		// API server calls, under the CA in the Secret.
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			t.Fatal("ca.crt holds no certificate")
		}
		blk, _ := pem.Decode(sec.Data[corev1.TLSCertKey])
		if blk == nil {
			t.Fatal("tls.crt is not PEM")
		}
		leaf, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate does not verify for 127.0.0.1 under ca.crt: %v", err)
		}

		if len(mwc.Webhooks) != 1 {
			t.Fatalf("%d webhooks, want 1", len(mwc.Webhooks))
		}
		w := mwc.Webhooks[0]
		if w.Name != register.WebhookName {
			t.Errorf("webhook name %q, want %q", w.Name, register.WebhookName)
		}
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("failurePolicy %v, want Ignore", w.FailurePolicy)
		}
		if w.TimeoutSeconds == nil || *w.TimeoutSeconds > 5 {
			t.Errorf("timeoutSeconds %v, want a short one (at most 5)", w.TimeoutSeconds)
		}
		if w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("sideEffects %v, want None", w.SideEffects)
		}
		if w.ClientConfig.URL == nil || *w.ClientConfig.URL != names.url || w.ClientConfig.Service != nil {
			t.Errorf("clientConfig %+v, want URL %s", w.ClientConfig, names.url)
		}
		if string(w.ClientConfig.CABundle) != string(caPEM) {
			t.Error("registered caBundle differs from the Secret's ca.crt")
		}
		nsSel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			ns   string
			want bool
		}{{ns, true}, {"default", false}, {"aware-system", false}, {"kube-system", false}} {
			if got := nsSel.Matches(labels.Set{"kubernetes.io/metadata.name": tc.ns}); got != tc.want {
				t.Errorf("namespaceSelector %q matches namespace %s: %v, want %v", nsSel, tc.ns, got, tc.want)
			}
		}
		objSel, err := metav1.LabelSelectorAsSelector(w.ObjectSelector)
		if err != nil {
			t.Fatal(err)
		}
		if objSel.Matches(labels.Set{register.OptOutLabel: register.OptOutValue}) || !objSel.Matches(labels.Set{"app": app}) {
			t.Errorf("objectSelector %q must skip opted-out pods only", objSel)
		}

		// The heartbeat Lease is renewed, not merely written once.
		leases := tb.Client.CoordinationV1().Leases("aware-system")
		var first time.Time
		framework.Eventually(t, 30*time.Second, "heartbeat Lease "+names.lease+" renewed", func(ctx context.Context) (bool, error) {
			l, err := leases.Get(ctx, names.lease, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil || l.Spec.HolderIdentity == nil {
				return false, fmt.Errorf("incomplete Lease spec %+v", l.Spec)
			}
			if *l.Spec.LeaseDurationSeconds != 10 {
				return false, fmt.Errorf("%w: leaseDurationSeconds %d, want 10", framework.ErrPermanent, *l.Spec.LeaseDurationSeconds)
			}
			if first.IsZero() {
				first = l.Spec.RenewTime.Time
			}
			if !l.Spec.RenewTime.After(first) {
				return false, fmt.Errorf("renewTime still %s", first)
			}
			return true, nil
		})
	}) {
		t.FailNow()
	}

	// The API server picks registrations up asynchronously: dry-run pod
	// creations until one reaches the admission controller.
	var calledBefore float64
	framework.Eventually(t, 60*time.Second, "the API server to call the registered webhook", func(ctx context.Context) (bool, error) {
		ac.running(t)
		before, _, err := ac.metric(ctx, "aware_admission_requests_total")
		if err != nil {
			return false, err
		}
		if _, err := tb.Client.CoreV1().Pods(ns).Create(ctx, podSpec("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return false, err
		}
		after, _, err := ac.metric(ctx, "aware_admission_requests_total")
		if err != nil {
			return false, err
		}
		calledBefore = after
		return after > before, fmt.Errorf("%g admission requests answered", after)
	})

	// The workload, its PDB, usage, and a recommendation.
	if _, err := tb.Client.AppsV1().Deployments(ns).Create(ctx, oversizedDeployment(app, replicas), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	original, err := tb.WaitForRunningPods(ctx, ns, selector, replicas, 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// No MPA yet: the webhook is called (the namespace is selected) and
	// leaves the pods alone.
	calledAfter, _, err := ac.metric(ctx, "aware_admission_requests_total")
	if err != nil {
		t.Fatal(err)
	}
	if calledAfter-calledBefore < replicas {
		t.Errorf("the admission controller answered %g requests for %d pods: the registration does not reach it", calledAfter-calledBefore, replicas)
	}
	for _, p := range original {
		if _, ok := p.Annotations[patch.UpdatesAnnotation]; ok || p.Spec.Containers[0].Resources.Requests.Cpu().String() != "300m" {
			t.Fatalf("pod %s changed without an MPA: annotations %v, requests %v", p.Name, p.Annotations, p.Spec.Containers[0].Resources.Requests)
		}
	}
	minAvail := intstr.FromInt32(floor)
	if _, err := tb.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: app},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvail, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PDB: %v", err)
	}
	framework.Eventually(t, 60*time.Second, "the PDB to allow one disruption", func(ctx context.Context) (bool, error) {
		pdb, err := tb.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.DisruptionsAllowed != 1 {
			return false, fmt.Errorf("status %+v", pdb.Status)
		}
		return true, nil
	})
	runEmulator(t, ns, labels.SelectorFromSet(labels.Set{"app": app}), baseRate)
	getMPA := createSizedMPA(t, ns, app, v1alpha1.UpdateModeRecreate, replicas)
	rec := startRecommender(t, ns)
	targets := targetLog{}
	targets.see(waitForRecommendation(t, rec, getMPA))

	watch := watchPods(t, ns, selector)
	watch.arm()
	if got := watch.minAvailable(); got != replicas {
		t.Fatalf("%d pods available before the updater starts, want %d", got, replicas)
	}
	// --min-replicas=1 and a workload burst of 2 evictions per loop make
	// the updater ask for more disruption than the PDB allows: the PDB,
	// enforced by the Eviction API, is what must keep floor pods up.
	upd := startUpdater(t, ns, names.lease,
		"--update-interval=5s",
		"--min-replicas=1",
		"--eviction-rate-limit=10",
		"--eviction-rate-burst=10",
		"--workload-eviction-rate-limit=1",
		"--workload-eviction-rate-burst=2",
	)

	originalUIDs := map[types.UID]bool{}
	for _, p := range original {
		originalUIDs[p.UID] = true
	}
	start := time.Now()
	var pods []corev1.Pod
	framework.Eventually(t, 4*time.Minute, "every original pod replaced by a webhook-sized one", func(ctx context.Context) (bool, error) {
		ac.running(t)
		rec.running(t)
		upd.running(t)
		m, err := getMPA(ctx)
		if err != nil {
			return false, err
		}
		targets.see(m)
		pods, err = tb.RunningPods(ctx, ns, selector)
		if err != nil {
			return false, err
		}
		left := 0
		for _, p := range pods {
			if originalUIDs[p.UID] {
				left++
			}
		}
		if left > 0 || len(pods) != replicas {
			return false, fmt.Errorf("%d running pods, %d of them original", len(pods), left)
		}
		return true, nil
	})
	t.Logf("all %d pods replaced %s after the updater started; fewest available pods seen: %d", replicas, time.Since(start).Round(time.Second), watch.minAvailable())

	t.Run("evicted through the Eviction API within the PodDisruptionBudget", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		if got := watch.minAvailable(); got < floor {
			t.Errorf("only %d pods were available at one point; the PDB's minAvailable is %d", got, floor)
		}
		for uid := range originalUIDs {
			if !watch.wasEvicted(uid) {
				t.Errorf("pod %s went without a DisruptionTarget=EvictionByEvictionAPI condition", uid)
			}
		}
		blocked, _, err := upd.metric(ctx, "aware_updater_evictions_total", "result=blocked_by_pdb")
		if err != nil {
			t.Fatal(err)
		}
		evicted, _, err := upd.metric(ctx, "aware_updater_evictions_total", "result=success", "reason=OutsideBounds")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("updater: %g evictions, %g blocked by the PDB", evicted, blocked)
		if evicted < replicas {
			t.Errorf("%g successful evictions, want at least %d", evicted, replicas)
		}
		// Two evictions per loop against one allowed disruption: the PDB
		// must have refused some, or it was never what held the floor.
		if blocked < 1 {
			t.Error("no eviction was refused by the PDB: the test did not exercise it")
		}
		ev, err := tb.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=EvictedByUpdater,involvedObject.kind=Pod"})
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Items) < replicas {
			t.Errorf("%d EvictedByUpdater events on pods, want at least %d", len(ev.Items), replicas)
		}
	})

	t.Run("replacements carry the recommendation, set by the webhook", func(t *testing.T) {
		tb.DumpLogsOnFailure(t)
		patched, _, err := ac.metric(ctx, "aware_admission_requests_total", "result=patched")
		if err != nil {
			t.Fatal(err)
		}
		if patched < replicas {
			t.Errorf("the admission controller patched %g pods, want at least %d", patched, replicas)
		}
		for _, p := range pods {
			ann := p.Annotations[patch.UpdatesAnnotation]
			if !strings.Contains(ann, "cpu request") || !strings.Contains(ann, "memory request") {
				t.Errorf("pod %s: %s annotation %q, want it to list the cpu and memory requests", p.Name, patch.UpdatesAnnotation, ann)
			}
			res := p.Spec.Containers[0].Resources
			cpu, mem := res.Requests.Cpu(), res.Requests.Memory()
			// Sized at creation to the target of that moment.
			if !targets.has(res.Requests) {
				t.Errorf("pod %s: requests %s/%s are none of the targets published meanwhile %v", p.Name, cpu, mem, keys(targets))
			}
			if cpu.MilliValue() < 10 || cpu.MilliValue() > 100 || mem.Value() < 32*mib || mem.Value() > 256*mib {
				t.Errorf("pod %s: requests %s/%s outside the policy [10m, 100m] / [32Mi, 256Mi]", p.Name, cpu, mem)
			}
			// Limits keep the template's limit/request ratios (3 for CPU,
			// 2 for memory).
			if r := float64(res.Limits.Cpu().MilliValue()) / float64(cpu.MilliValue()); math.Abs(r-3) > 0.05 {
				t.Errorf("pod %s: cpu limit %s for request %s, want 3x", p.Name, res.Limits.Cpu(), cpu)
			}
			if r := float64(res.Limits.Memory().Value()) / float64(mem.Value()); math.Abs(r-2) > 0.01 {
				t.Errorf("pod %s: memory limit %s for request %s, want 2x", p.Name, res.Limits.Memory(), mem)
			}
		}
		d, err := tb.Client.AppsV1().Deployments(ns).Get(ctx, app, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().String(); got != "300m" {
			t.Errorf("the Deployment's template was changed (cpu request %s): only pods are sized", got)
		}
	})
}

// targetLog records every container target an MPA's status has held while
// a test polled it. A pod sized by the webhook or a resize carries exactly
// the target of that moment; the recommender changes it at most once per
// interval (10s here), far less often than the tests poll, so the log holds
// every value a component can have acted on.
type targetLog map[string]bool

func (l targetLog) see(m *v1alpha1.MultidimPodAutoscaler) {
	if r := m.Status.Recommendation; r != nil && len(r.ContainerRecommendations) > 0 {
		l[requestsKey(r.ContainerRecommendations[0].Target)] = true
	}
}

func (l targetLog) has(requests corev1.ResourceList) bool { return l[requestsKey(requests)] }

// requestsKey is "<milli-CPU>m/<bytes>", to compare requests with targets
// whatever the quantities' formats.
func requestsKey(rl corev1.ResourceList) string {
	return fmt.Sprintf("%dm/%d", rl.Cpu().MilliValue(), rl.Memory().Value())
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
