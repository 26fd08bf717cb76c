package nodeinstall

import (
	"strings"
	"testing"
	"time"

	"github.com/aware-k8s/aware/pkg/apis/autoscaling/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

func TestMPASpecManifest(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		spec MPASpec
		want func(*testing.T, *v1alpha1.MultidimPodAutoscaler)
	}{
		{"MPA as before: no spec.rl", MPASpec{Namespace: "ns1", MinReplicas: 1, MaxReplicas: 8}, func(t *testing.T, m *v1alpha1.MultidimPodAutoscaler) {
			if m.Spec.RL != nil {
				t.Errorf("spec.rl = %+v, want none", m.Spec.RL)
			}
			if g := m.Spec.Constraints.Global; g == nil || *g.MinReplicas != 1 || *g.MaxReplicas != 8 {
				t.Errorf("constraints %+v", m.Spec.Constraints)
			}
		}},
		{"an SLO", MPASpec{Namespace: "ns1", MinReplicas: 1, MaxReplicas: 8, SLOMetric: "aware_testapp_request_duration_seconds", SLOTarget: 250 * time.Millisecond},
			func(t *testing.T, m *v1alpha1.MultidimPodAutoscaler) {
				s := m.Spec.RL.SLO
				if s == nil || s.Metric.Name != "aware_testapp_request_duration_seconds" || s.Percentile != 95 || s.Target.Duration != 250*time.Millisecond {
					t.Errorf("spec.rl.slo = %+v", s)
				}
				if m.Spec.RL.Mode != "" || m.Spec.RL.Gates != nil {
					t.Errorf("spec.rl = %+v, want the SLO only", m.Spec.RL)
				}
			}},
		{"an agent", MPASpec{Namespace: "ns1", MinReplicas: 1, MaxReplicas: 8, SLOMetric: "m_seconds", SLOTarget: time.Second, Mode: v1alpha1.RLModeShadow,
			Gates: &v1alpha1.RLGates{Window: 2, EpisodeSteps: 2, PromoteMinMean: f(-1), PromoteMaxStdDev: f(2), RetrainBelowMean: f(-1), RetrainAboveStdDev: f(2)}},
			func(t *testing.T, m *v1alpha1.MultidimPodAutoscaler) {
				rl := m.Spec.RL
				if rl.Mode != v1alpha1.RLModeShadow || rl.SLO.Target.Duration != time.Second {
					t.Errorf("spec.rl = %+v", rl)
				}
				g := rl.Gates
				if g == nil || g.Window != 2 || g.EpisodeSteps != 2 || *g.PromoteMinMean != -1 || *g.PromoteMaxStdDev != 2 || *g.RetrainBelowMean != -1 || *g.RetrainAboveStdDev != 2 {
					t.Errorf("spec.rl.gates = %+v", g)
				}
			}},
		// A bare On is a boolean in YAML 1.1, which the API server refused.
		{"mode On", MPASpec{Namespace: "ns1", MinReplicas: 1, MaxReplicas: 8, Mode: v1alpha1.RLModeOn},
			func(t *testing.T, m *v1alpha1.MultidimPodAutoscaler) {
				if m.Spec.RL.Mode != v1alpha1.RLModeOn {
					t.Errorf("spec.rl.mode = %q, want On", m.Spec.RL.Mode)
				}
			}},
		{"mode Off", MPASpec{Namespace: "ns1", MinReplicas: 1, MaxReplicas: 8, Mode: v1alpha1.RLModeOff},
			func(t *testing.T, m *v1alpha1.MultidimPodAutoscaler) {
				if m.Spec.RL.Mode != v1alpha1.RLModeOff {
					t.Errorf("spec.rl.mode = %q, want Off", m.Spec.RL.Mode)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m v1alpha1.MultidimPodAutoscaler
			if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(tc.spec.Manifest(), "---\n")), &m); err != nil {
				t.Fatalf("%v\n%s", err, tc.spec.Manifest())
			}
			if m.Namespace != "ns1" || m.Spec.ScaleTargetRef.Name != "testapp" {
				t.Errorf("metadata/target %s %+v", m.Namespace, m.Spec.ScaleTargetRef)
			}
			tc.want(t, &m)
		})
	}
}

func TestTestAppFileSD(t *testing.T) {
	for _, tc := range []struct {
		name, fileSD string
	}{
		{"without", ""},
		{"with", "/tmp/tb/node/file-sd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := TestApp{Namespace: "ns1", Env: Env{Node: "node", Tag: "t"}, Port: 18840, Args: []string{"--cpu=10ms"},
				CPU: "200m", CPULimit: "200m", Memory: "96Mi", MemoryLimit: "256Mi", FileSD: tc.fileSD}
			docs := strings.Split(a.Manifest(), "\n---\n")
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict([]byte(docs[len(docs)-1]), &d); err != nil {
				t.Fatalf("%v\n%s", err, a.Manifest())
			}
			c := d.Spec.Template.Spec.Containers[0]
			args := strings.Join(c.Args, " ")
			if !strings.Contains(args, "--reuse-port") || !strings.HasSuffix(args, "--cpu=10ms") {
				t.Errorf("args %q", args)
			}
			// Every replica is ready by its own file, read by an exec
			// probe, and opens the shared port once ready.
			if !strings.Contains(args, "--listen-when-ready") || !strings.Contains(args, "--ready-file="+readyFile) {
				t.Errorf("args %q lack --listen-when-ready and --ready-file", args)
			}
			vs, ms := d.Spec.Template.Spec.Volumes, c.VolumeMounts
			if len(vs) == 0 || vs[0].Name != "ready" || vs[0].EmptyDir == nil || len(ms) == 0 || ms[0].Name != "ready" || ms[0].MountPath != readyDir {
				t.Errorf("volumes %+v, mounts %+v: want the ready emptyDir first", vs, ms)
			}
			if p := c.ReadinessProbe; p == nil || p.Exec == nil || strings.Join(p.Exec.Command, " ") != "/testapp probe --ready-file="+readyFile {
				t.Errorf("readiness probe %+v, want an exec of testapp probe", p)
			}
			if tc.fileSD == "" {
				if strings.Contains(args, "--file-sd") || len(vs) != 1 || len(c.Env) > 0 {
					t.Errorf("file_sd set up without FileSD: args %q, volumes %v, env %v", args, vs, c.Env)
				}
				return
			}
			if !strings.Contains(args, "--metrics-address=127.0.0.1:0") || !strings.Contains(args, "--file-sd="+fileSDMount) {
				t.Errorf("args %q lack the metrics port and --file-sd", args)
			}
			if len(vs) != 2 || vs[1].HostPath == nil || vs[1].HostPath.Path != tc.fileSD || len(ms) != 2 || ms[1].MountPath != fileSDMount {
				t.Errorf("volumes %+v, mounts %+v", vs, ms)
			}
			if len(c.Env) != 2 || c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.name" || c.Env[1].ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
				t.Errorf("env %+v, want POD_NAME and POD_NAMESPACE", c.Env)
			}
		})
	}
}
