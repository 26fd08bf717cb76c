package whatif

import (
	"fmt"
	"math"

	"github.com/aware-k8s/aware/pkg/rl/stats"
)

// Idle modes of FitOptions.Idle: whether the CPU line's intercept is
// replayed as each pod's idle CPU (sim.Demand.BaseCPU).
const (
	// IdleAuto replays it when it is plausible (not negative, and at
	// most MaxIdleShare of the pods' mean CPU); otherwise the app has no
	// idle CPU and the fit line says why.
	IdleAuto = "auto"
	// IdleOn replays any intercept that is not negative, however large.
	IdleOn = "on"
	// IdleOff never replays it: the app's pods use CPU only for their
	// requests, as before the simulator had an idle CPU.
	IdleOff = "off"
	// IdleGiven is the mode a fit reports when FitOptions.IdleCPU gave
	// the idle CPU; it is not a value of the --fit-idle flag.
	IdleGiven = "given"
	// MaxReplicasRateCorr is the correlation of the fitted steps' replicas
	// and rate from which the fit line says the history cannot tell the
	// pods' idle CPU from their requests' (a variance inflation of 5 or
	// more for a fit of both).
	MaxReplicasRateCorr = 0.9
	// DefaultMaxIdleShare bounds IdleAuto's idle CPU per pod at half of
	// the pods' mean CPU: beyond it the line says the pods mostly idle, so
	// the intercept carries more of the CPU than the rate explains, and a
	// small error in the slope becomes a large one in the idle CPU.
	DefaultMaxIdleShare = 0.5
)

// IdleFit is the pods' idle CPU the fit read from the CPU line's
// intercept, and whether the replay takes it.
type IdleFit struct {
	// PerPod is the intercept over the mean replicas of the fitted steps
	// (cores per pod; negative when the intercept is).
	PerPod float64 `json:"perPod"`
	// Share is PerPod over the pods' mean CPU of the fitted steps.
	Share float64 `json:"share"`
	// Mode is FitOptions.Idle as the fit read it ("" read as IdleOff).
	Mode string `json:"mode"`
	// Replayed says whether the app's BaseCPU is PerPod; when it is not,
	// Reason says why.
	Replayed bool   `json:"replayed"`
	Reason   string `json:"reason,omitempty"`
	// ReplicasRateCorr is the correlation of the replicas and the rate
	// over the fitted steps. Where the replicas followed the rate, as an
	// HPA's do, total CPU = idle·replicas + S·rate is near a line in the
	// rate alone, and the CPU line's slope is S plus the idle CPU over the
	// pods' load: the history cannot tell them apart, and a policy that
	// loads its pods otherwise is predicted with the wrong CPU (dearer
	// for fewer, busier pods). On the real node's fourteen HPA histories
	// it is 0.85–1.00, and a fit of both gives −193 to +234 millicores a
	// pod (docs/whatif.md).
	ReplicasRateCorr float64 `json:"replicasRateCorr,omitempty"`
}

// fitIdle turns the CPU line's intercept into an idle CPU per pod and
// decides, under o.Idle, whether the replay takes it.
//
// The line is total CPU = Intercept + Slope·rate, the simulator's pods
// n·BaseCPU + CPUSeconds·rate. With BaseCPU = Intercept/mean(n) over the
// fitted steps, the app replayed with the recorded replicas and rate uses
// the line's mean total CPU exactly (mean(n)·BaseCPU + Slope·mean(rate) =
// the mean of the total CPU, as a least-squares line passes through the
// means), whereas the intercept taken whole as each pod's idle CPU would
// count it once per pod (on the real node's histories, 1.7–1.9 pods on
// average, nearly twice).
//
// With o.IdleCPU the line was fitted on the requests' work alone, and the
// idle CPU is o.IdleCPU, replayed.
func fitIdle(cpu Regression, replicas []float64, o FitOptions) IdleFit {
	idle := IdleFit{Mode: o.Idle}
	if idle.Mode == "" {
		idle.Mode = IdleOff
	}
	var n float64
	for _, r := range replicas {
		n += r
	}
	if len(replicas) == 0 || !(n > 0) {
		idle.Reason = "no replicas to share it"
		return idle
	}
	n /= float64(len(replicas))
	if o.IdleCPU > 0 {
		idle.Mode, idle.PerPod, idle.Replayed = IdleGiven, o.IdleCPU, true
		if pod := cpu.MeanY/n + o.IdleCPU; pod > 0 {
			idle.Share = idle.PerPod / pod
		}
		return idle
	}
	idle.PerPod = cpu.Intercept / n
	if pod := cpu.MeanY / n; pod > 0 {
		idle.Share = idle.PerPod / pod
	}
	maxShare := o.MaxIdleShare
	if !(maxShare > 0) {
		maxShare = DefaultMaxIdleShare
	}
	switch {
	case idle.Mode == IdleOff:
		idle.Reason = "--fit-idle off"
	case math.IsNaN(idle.PerPod) || idle.PerPod < 0:
		idle.Reason = fmt.Sprintf("the CPU line's intercept is negative (%.1f millicores per pod): CPU per request is over-estimated, or the rate query counts requests that cost nothing", 1e3*idle.PerPod)
	case idle.Mode == IdleAuto && idle.Share > maxShare:
		idle.Reason = fmt.Sprintf("%.0f%% of the pods' mean CPU, above the %.0f%% --fit-idle auto takes (--fit-idle on takes it)", 100*idle.Share, 100*maxShare)
	default:
		idle.Replayed = true
	}
	return idle
}

// baseCPU is the idle CPU per pod the app is given.
func (i IdleFit) baseCPU() float64 {
	if i.Replayed {
		return i.PerPod
	}
	return 0
}

// String is the fit line's account of the idle CPU.
func (i IdleFit) String() string {
	switch {
	case i.Mode == IdleGiven:
		return fmt.Sprintf("idle %.1f millicores per pod (%.0f%% of its CPU), given by --fit-idle-cpu, replayed", 1e3*i.PerPod, 100*i.Share)
	case i.Replayed:
		return fmt.Sprintf("idle %.1f millicores per pod (%.0f%% of its CPU), replayed%s", 1e3*i.PerPod, 100*i.Share, i.confounded())
	}
	return fmt.Sprintf("idle %.1f millicores per pod, not replayed (%s)%s", 1e3*i.PerPod, i.Reason, i.confounded())
}

// confounded warns when the replicas followed the rate, so that the line
// could not tell the idle CPU from the requests'.
func (i IdleFit) confounded() string {
	if !(math.Abs(i.ReplicasRateCorr) >= MaxReplicasRateCorr) {
		return ""
	}
	return fmt.Sprintf("; the replicas followed the rate (correlation %.2f), so the CPU per request holds the pods' idle CPU at this history's load per pod (--fit-idle-cpu takes a known idle CPU)", i.ReplicasRateCorr)
}

// correlation is Pearson's r of x and y (finite, as the fit's steps are);
// 0 when either has no spread.
func correlation(x, y []float64) float64 {
	r, err := stats.Pearson(x, y)
	if err != nil || math.IsNaN(r) {
		return 0
	}
	return r
}
