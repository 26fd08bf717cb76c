package nodeinstall

import (
	"fmt"
	"strings"
)

// TestApp is a Deployment of the test app (aware-testapp) on the real
// node: one replica in the host's network, every replica on one loopback
// port with SO_REUSEPORT, ready once /readyz answers. make e2e-node's
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
}

// Manifest is the Namespace and the Deployment "testapp", as YAML.
func (a TestApp) Manifest() string {
	args := append([]string{fmt.Sprintf("--address=127.0.0.1:%d", a.Port), "--reuse-port"}, a.Args...)
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
          httpGet: {path: /readyz, port: %[9]d}
          periodSeconds: 2
          timeoutSeconds: 2
          failureThreshold: 3
`, a.Namespace, a.Env.Node, a.Env.Tag, strings.Join(args, ", "), a.CPU, a.Memory, a.CPULimit, a.MemoryLimit, a.Port)
}

// MPA is a MultidimPodAutoscaler over the test app in namespace, acting
// in place (InPlaceOrRecreate), with the given replica bounds and 50m–1
// CPU and 64Mi–1Gi per container.
func MPA(namespace string, minReplicas, maxReplicas int) string {
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
      controlledResources: [cpu, memory]
`, namespace, minReplicas, maxReplicas)
}
