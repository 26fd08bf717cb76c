package nodeinstall

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
)

// TestApp is a Deployment of the test app (aware-testapp) on the real
// node: one replica in the host's network, every replica on one loopback
// port with SO_REUSEPORT, which it opens once its start-up delay has
// passed (--listen-when-ready), Ready once its own ready file exists (an
// exec probe of `testapp probe`: an HTTP probe of the shared port reaches
// whichever replica the kernel picks). make e2e-node's
// workload cases and make bench-real deploy it through Manifest, so both
// run the same pod.
type TestApp struct {
	Namespace string
	Env       Env
	Port      int
	// Args are the app's flags after --address and --reuse-port.
	Args []string
	// CPU and Memory are the container's requests; CPULimit and
	// MemoryLimit its limits.
	CPU, CPULimit, Memory, MemoryLimit string
	// FileSD, if set, is a directory on the node (writable by the image's
	// user) into which every replica writes its Prometheus file_sd target:
	// its metrics on a loopback port of its own (--metrics-address
	// 127.0.0.1:0, since the replicas share the work port), labelled with
	// its namespace and pod (--file-sd). A Prometheus job reading
	// FileSD/*.json then scrapes every replica, and stops scraping one
	// that exits (it removes its file).
	FileSD string
}

// fileSDMount is where FileSD is mounted in the container.
const fileSDMount = "/var/run/aware-file-sd"

// readyDir is the replica's own emptyDir, readyFile its ready file there.
const (
	readyDir  = "/run/testapp"
	readyFile = readyDir + "/ready"
)

// Manifest is the Namespace and the Deployment "testapp", as YAML.
func (a TestApp) Manifest() string {
	args := []string{fmt.Sprintf("--address=127.0.0.1:%d", a.Port), "--reuse-port", "--listen-when-ready", "--ready-file=" + readyFile}
	mounts := fmt.Sprintf(`
        volumeMounts:
        - {name: ready, mountPath: %s}`, readyDir)
	volumes := `
      volumes:
      - name: ready
        emptyDir: {medium: Memory, sizeLimit: 1Mi}`
	var env string
	if a.FileSD != "" {
		args = append(args, "--metrics-address=127.0.0.1:0", "--file-sd="+fileSDMount)
		env = `
        env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: POD_NAMESPACE
          valueFrom: {fieldRef: {fieldPath: metadata.namespace}}`
		mounts += fmt.Sprintf(`
        - {name: file-sd, mountPath: %s}`, fileSDMount)
		volumes += fmt.Sprintf(`
      - name: file-sd
        hostPath: {path: %q, type: Directory}`, a.FileSD)
	}
	args = append(args, a.Args...)
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: testapp, namespace: %[1]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: testapp}}
  template:
    metadata: {labels: {app: testapp}}
    spec:
      hostNetwork: true
      dnsPolicy: Default
      nodeSelector: {kubernetes.io/hostname: %[2]s}
      terminationGracePeriodSeconds: 15
      containers:
      - name: app
        image: aware-testapp:%[3]s
        imagePullPolicy: Never
        args: [%[4]s]
        resources:
          requests: {cpu: %[5]s, memory: %[6]s}
          limits: {cpu: %[7]s, memory: %[8]s}
        readinessProbe:
          exec: {command: [/testapp, probe, "--ready-file=%[9]s"]}
          periodSeconds: 2
          timeoutSeconds: 2
          failureThreshold: 3%[10]s%[11]s%[12]s
`, a.Namespace, a.Env.Node, a.Env.Tag, strings.Join(args, ", "), a.CPU, a.Memory, a.CPULimit, a.MemoryLimit, readyFile, env, mounts, volumes)
}

// MPA is a MultidimPodAutoscaler over the test app in namespace, acting
// in place (InPlaceOrRecreate), with the given replica bounds and 50m–1
// CPU and 64Mi–1Gi per container.
func MPA(namespace string, minReplicas, maxReplicas int) string {
	return MPASpec{Namespace: namespace, MinReplicas: minReplicas, MaxReplicas: maxReplicas}.Manifest()
}

// MPASpec is MPA's autoscaler with spec.rl: an SLO on the test app's
// latency histogram (which also gives the recommender the request rate:
// it counts the histogram's observations), and the agent's mode and gates.
type MPASpec struct {
	Namespace                string
	MinReplicas, MaxReplicas int
	// SLOMetric and SLOTarget, if SLOMetric is set, are spec.rl.slo's
	// metric name (e.g. aware_testapp_request_duration_seconds) and p95
	// target.
	SLOMetric string
	SLOTarget time.Duration
	// Mode is spec.rl.mode ("" leaves it out: Off).
	Mode v1alpha1.RLMode
	// Gates are spec.rl.gates (nil: the API's defaults).
	Gates *v1alpha1.RLGates
}

// Manifest is the autoscaler as YAML.
func (s MPASpec) Manifest() string {
	var rl strings.Builder
	if s.SLOMetric != "" || s.Mode != "" || s.Gates != nil {
		rl.WriteString("\n  rl:")
		if s.Mode != "" {
			// Quoted: YAML 1.1 reads a bare On or Off as a boolean.
			fmt.Fprintf(&rl, "\n    mode: %q", s.Mode)
		}
		if s.SLOMetric != "" {
			fmt.Fprintf(&rl, "\n    slo: {metric: {name: %s}, percentile: 95, target: %s}", s.SLOMetric, s.SLOTarget)
		}
		if g := s.Gates; g != nil {
			fmt.Fprintf(&rl, "\n    gates: {window: %d, episodeSteps: %d", g.Window, g.EpisodeSteps)
			for _, f := range []struct {
				name string
				v    *float64
			}{{"promoteMinMean", g.PromoteMinMean}, {"promoteMaxStdDev", g.PromoteMaxStdDev}, {"retrainBelowMean", g.RetrainBelowMean}, {"retrainAboveStdDev", g.RetrainAboveStdDev}} {
				if f.v != nil {
					fmt.Fprintf(&rl, ", %s: %s", f.name, strconv.FormatFloat(*f.v, 'g', -1, 64))
				}
			}
			rl.WriteString("}")
		}
	}
	return fmt.Sprintf(`---
apiVersion: autoscaling.aware.dev/v1alpha1
kind: MultidimPodAutoscaler
metadata: {name: testapp, namespace: %s}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: testapp}
  policy: {updateMode: InPlaceOrRecreate}
  constraints: {global: {minReplicas: %d, maxReplicas: %d}}
  resourcePolicy:
    containerPolicies:
    - containerName: '*'
      minAllowed: {cpu: 50m, memory: 64Mi}
      maxAllowed: {cpu: "1", memory: 1Gi}
      controlledResources: [cpu, memory]%s
`, s.Namespace, s.MinReplicas, s.MaxReplicas, rl.String())
}
