package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// SpreadApps returns a copy of apps in which every app's CPU time per
// request, memory per request and pod start-up delay are each multiplied by
// its own factor, log-uniform in [1, spread] and drawn from seed and the
// app's position: pre-training apps that span what the adapt experiment's
// --adapt-*-factor shifts do to a new app. As those shifts do, the factors
// change the demand after the app was sized, so a factor above 1 leaves the
// app's deployment, requests and SLO as generated (under-provisioned for
// the heavier demand); that is the direction the shifted evidence apps
// move, so factors below 1 are not drawn. spread <= 1 returns an unchanged
// copy. Equal arguments give equal apps.
func SpreadApps(apps []sim.App, seed uint64, spread float64) ([]sim.App, error) {
	if math.IsNaN(spread) || math.IsInf(spread, 0) {
		return nil, fmt.Errorf("parameter spread must be finite, got %v", spread)
	}
	out := make([]sim.App, len(apps))
	copy(out, apps)
	if spread <= 1 {
		return out, nil
	}
	ln := math.Log(spread)
	for i := range out {
		rng := rand.New(rand.NewPCG(mix(seed, 0x737072656164), uint64(i)))
		factor := func() float64 { return math.Exp(ln * rng.Float64()) }
		a := &out[i]
		a.CPUSeconds *= factor()
		a.MemoryPerRequest *= factor()
		a.StartupDelay = time.Duration(float64(a.StartupDelay) * factor())
		if err := a.Validate(); err != nil {
			return nil, fmt.Errorf("spread app %s: %w", a.Name, err)
		}
	}
	return out, nil
}
