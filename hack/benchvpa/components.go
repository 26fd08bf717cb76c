//go:build benchvpa

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aware-k8s/aware/hack/benchvpa/bench"
)

// startProc starts a component of side with a counting proxy and a
// kubeconfig for the ServiceAccount namespace/sa.
func (h *harness) start(ctx context.Context, name, side, bin, namespace, sa string, env []string, args func(p *proc, kubeconfig string) []string) (*proc, error) {
	proxy, err := newCountingProxy(h.apiURL, h.tb.CAFile, h.certFile, h.keyFile)
	if err != nil {
		return nil, err
	}
	token, err := h.tb.ServiceAccountToken(ctx, namespace, sa, 6*time.Hour)
	if err != nil {
		proxy.close()
		return nil, err
	}
	kc := filepath.Join(h.o.out, name+".kubeconfig")
	if err := writeKubeconfig(kc, proxy.addr, h.tb.CAFile, token, namespace+"/"+sa); err != nil {
		proxy.close()
		return nil, err
	}
	p := &proc{name: name, side: side, proxy: proxy, env: env}
	// Loop components are measured between the loop starts their proxy
	// sees (measureOne).
	proxy.marker, proxy.sample = bench.LoopMarker(name), p.sample
	h.procs = append(h.procs, p)
	return p, startProc(ctx, p, h.logDir, bin, args(p, kc)...)
}

func (h *harness) stopProc(p *proc) {
	p.stop()
	if p.proxy != nil {
		p.proxy.close()
	}
}

func (h *harness) stopAll() {
	for _, p := range h.procs {
		h.stopProc(p)
	}
}

// Ports of a component: metrics and health (ours) or the one metrics
// address (VPA's).
func ports() (metrics, health string) {
	m, _ := freeAddr()
	hl, _ := freeAddr()
	return m, hl
}

func (h *harness) startAdmissionControllers(ctx context.Context) ([]webhookTarget, error) {
	// Each runs with the environment of its project's Deployment.
	ourEnv, err := deployedEnv(filepath.Join(h.o.repo, "deploy", "admission-controller", "admission-controller.yaml"), "admission-controller")
	if err != nil {
		return nil, err
	}
	theirEnv, err := deployedEnv(filepath.Join(h.o.vpaDir, "deploy", "admission-controller-deployment.yaml"), "admission-controller")
	if err != nil {
		return nil, err
	}
	logf("admission controllers' environment from their Deployments: AWARE %q, VPA %q", ourEnv, theirEnv)
	ours, err := h.start(ctx, "aware-admission-controller", "AWARE", filepath.Join(h.o.awareBin, "admission-controller"), "aware-system", "aware-admission-controller", ourEnv,
		func(p *proc, kc string) []string {
			m, hl := ports()
			p.readyAddr, _ = freeAddr()
			p.metricsURL, p.readyURL = "http://"+m+"/metrics", "http://"+hl+"/readyz"
			return append([]string{"--kubeconfig=" + kc, "--metrics-bind-address=" + m, "--health-bind-address=" + hl,
				"--namespace=aware-system", "--webhook-bind-address=" + p.readyAddr, "--cert-mode=files",
				"--tls-cert-file=" + h.certFile, "--tls-private-key-file=" + h.keyFile, "--register-webhook=false",
				// The Lease our updater checks before it evicts (VPA's updater
				// checks its admission controller's status Lease the same way).
				"--heartbeat-lease-name=aware-admission-controller"}, h.qpsArgs()...)
		})
	if err != nil {
		return nil, err
	}
	theirs, err := h.start(ctx, "vpa-admission-controller", "VPA", filepath.Join(h.o.vpaBin, "admission-controller"), "kube-system", "vpa-admission-controller", theirEnv,
		func(p *proc, kc string) []string {
			m, _ := ports()
			p.readyAddr, _ = freeAddr()
			p.metricsURL = "http://" + m + "/metrics"
			_, port, _ := strings.Cut(p.readyAddr, ":")
			return append([]string{"--kubeconfig=" + kc, "--address=" + m, "--port=" + port,
				"--client-ca-file=" + h.tb.CAFile, "--tls-cert-file=" + h.certFile, "--tls-private-key=" + h.keyFile,
				"--register-webhook=false", "--v=1"}, h.qpsArgs()...)
		})
	if err != nil {
		return nil, err
	}
	targets := []webhookTarget{
		{side: "AWARE", url: "https://" + ours.readyAddr + "/mutate-pods", proc: ours},
		{side: "VPA", url: "https://" + theirs.readyAddr + "/", proc: theirs},
	}
	if !h.o.webhookFloor {
		return targets, nil
	}
	floor, err := h.startFloor(ctx)
	if err != nil {
		return nil, err
	}
	return append(targets, webhookTarget{side: floorSide, url: "https://" + floor.readyAddr + "/", proc: floor}), nil
}

// startFloor starts the floor webhook (floor.go): this harness's own
// binary in its serving mode, with the serving certificate both sides use.
func (h *harness) startFloor(ctx context.Context) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	p := &proc{name: "floor-webhook", side: floorSide}
	if p.readyAddr, err = freeAddr(); err != nil {
		return nil, err
	}
	h.procs = append(h.procs, p)
	return p, startProc(ctx, p, h.logDir, self, "--serve-floor="+p.readyAddr, "--floor-cert="+h.certFile, "--floor-key="+h.keyFile)
}

// loopProcs starts the loop components of the given sides.
func (h *harness) loopProcs(ctx context.Context, sides ...string) ([]*proc, error) {
	iv := h.o.interval.String()
	var out []*proc
	for _, side := range sides {
		switch side {
		case "AWARE":
			for _, c := range []string{"recommender", "updater"} {
				p, err := h.awareLoop(ctx, c)
				if err != nil {
					return out, err
				}
				out = append(out, p)
			}
		case "VPA":
			for _, c := range []struct{ name, flag string }{{"recommender", "--recommender-interval=" + iv}, {"updater", "--updater-interval=" + iv}} {
				p, err := h.start(ctx, "vpa-"+c.name, side, filepath.Join(h.o.vpaBin, c.name), "kube-system", "vpa-"+c.name, nil,
					func(p *proc, kc string) []string {
						m, _ := ports()
						p.metricsURL, p.readyURL = "http://"+m+"/metrics", "http://"+m+"/metrics"
						return append([]string{"--kubeconfig=" + kc, "--address=" + m, c.flag, "--v=1"}, h.qpsArgs()...)
					})
				if err != nil {
					return out, err
				}
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// awareLoop starts our loop component c, "recommender" or "updater".
func (h *harness) awareLoop(ctx context.Context, c string) (*proc, error) {
	flag := "--recommender-interval=" + h.o.interval.String()
	if c == "updater" {
		flag = "--update-interval=" + h.o.interval.String()
	}
	return h.start(ctx, "aware-"+c, "AWARE", filepath.Join(h.o.awareBin, c), "aware-system", "aware-"+c, nil,
		func(p *proc, kc string) []string {
			m, hl := ports()
			p.metricsURL, p.readyURL = "http://"+m+"/metrics", "http://"+hl+"/readyz"
			args := []string{"--kubeconfig=" + kc, "--metrics-bind-address=" + m, "--health-bind-address=" + hl, flag, "--leader-elect=false", "--v=1"}
			if h.o.profile > 0 {
				p.profileURL = "http://" + m + "/debug/pprof/profile"
				args = append(args, "--profiling")
			}
			return append(args, h.qpsArgs()...)
		})
}

// qpsArgs give every component the same client rate limit. The defaults
// differ (VPA 50/100, ours lower), and a loop that waits on its own rate
// limiter at a thousand targets measures the limiter, not the work.
func (h *harness) qpsArgs() []string {
	return []string{fmt.Sprintf("--kube-api-qps=%d", h.o.kubeQPS), fmt.Sprintf("--kube-api-burst=%d", 2*h.o.kubeQPS)}
}
