package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// AzureSampleOptions shape a synthetic file set in the layout a widely used
// sampling tool writes of the Azure Functions 2019 trace.
type AzureSampleOptions struct {
	// Functions is how many functions (rows) the invocations file has.
	Functions int
	// FirstMinute and Minutes are the minutes of the day it keeps (the
	// header numbers them FirstMinute..FirstMinute+Minutes-1).
	FirstMinute, Minutes int
	Seed                 uint64
}

// WriteAzureSample writes a synthetic sample of the Azure Functions 2019
// trace into dir, in the layout real samples come in: invocation minute
// columns for a window of the day only, and a memory file with an extra
// HashFunction column first. Its load is shaped as the trace's
// characterisation describes it (Shahrad et al., "Serverless in the Wild",
// USENIX ATC 2020): per-function mean rates heavy-tailed over about seven
// orders of magnitude, log10 of invocations per minute normal with mean
// -1.5 and deviation 1.5, so that about 45% of functions are invoked at
// most once an hour and about 84% at most once a minute; a third of the
// functions timer-triggered (a fixed period, so the count is exactly
// periodic); the others Poisson around a diurnal mean (±50% over the day)
// modulated by on/off bursts. Execution times are log-normal (median
// 300 ms, a few above the 10 s the loader accepts), app memory log-normal
// around 150 MB. The file set is seeded: equal options write equal files.
func WriteAzureSample(dir string, o AzureSampleOptions) (AzureFiles, error) {
	if o.Functions <= 0 || o.Minutes <= 0 || o.FirstMinute < 1 || o.FirstMinute+o.Minutes-1 > AzureMinutes {
		return AzureFiles{}, fmt.Errorf("azure sample: need functions > 0 and minutes within 1..%d, got %d functions, minutes %d..%d",
			AzureMinutes, o.Functions, o.FirstMinute, o.FirstMinute+o.Minutes-1)
	}
	rng := rand.New(rand.NewPCG(o.Seed, splitmix(o.Seed^0x73616d706c65)))
	hash := func() string { return fmt.Sprintf("%016x%016x", rng.Uint64(), rng.Uint64()) }
	var inv, dur, mem bytes.Buffer
	inv.WriteString(strings.Join(azureInvocations.columns, ","))
	for m := o.FirstMinute; m < o.FirstMinute+o.Minutes; m++ {
		inv.WriteString("," + strconv.Itoa(m))
	}
	inv.WriteString("\n")
	dur.WriteString(strings.Join(azureDurations.columns, ",") + "\n")
	mem.WriteString("HashFunction," + strings.Join(azureMemory.columns, ",") + "\n")
	var owner, app string
	for i := range o.Functions {
		// Apps hold one to three functions; each app gets a memory row.
		if i == 0 || rng.IntN(2) == 0 {
			owner, app = hash(), hash()
			base := 150 * math.Exp(0.5*rng.NormFloat64())
			fmt.Fprintf(&mem, "%s,%s,%s,%d,%.1f", hash(), owner, app, 100+rng.IntN(1000), base*1.15)
			for _, p := range []float64{0.8, 0.85, 0.95, 1.05, 1.15, 1.35, 1.5, 1.7} {
				fmt.Fprintf(&mem, ",%.1f", base*p)
			}
			mem.WriteString("\n")
		}
		fn := hash()
		perMinute := math.Pow(10, math.Max(-3.5, math.Min(4, -1.5+1.5*rng.NormFloat64())))
		timer := rng.IntN(3) == 0
		trigger := "http"
		if timer {
			trigger = "timer"
		}
		fmt.Fprintf(&inv, "%s,%s,%s,%s", owner, app, fn, trigger)
		period := max(1, int(math.Round(1/perMinute)))
		phase, offset := rng.Float64()*2*math.Pi, rng.IntN(period)
		burst := false
		for k := range o.Minutes {
			m := o.FirstMinute + k
			var c int
			if timer {
				if m%period == offset {
					c = max(1, int(math.Round(perMinute)))
				}
			} else {
				if burst {
					burst = rng.Float64() >= 0.1
				} else {
					burst = rng.Float64() < 0.01
				}
				mean := perMinute * (1 + 0.5*math.Sin(2*math.Pi*float64(m)/AzureMinutes+phase))
				if burst {
					mean *= 5
				}
				c = int(poisson(rng, mean))
			}
			fmt.Fprintf(&inv, ",%d", c)
		}
		inv.WriteString("\n")
		avg := 300 * math.Exp(1.5*rng.NormFloat64()) // ms
		ps := []float64{0.2, 0.4, 0.7, 0.9, 1.2, 3, 6}
		fmt.Fprintf(&dur, "%s,%s,%s,%.0f,%d,%.0f,%.0f", owner, app, fn, avg, 1+rng.IntN(100000), avg*ps[0], avg*ps[6])
		for _, p := range ps {
			fmt.Fprintf(&dur, ",%.0f", avg*p)
		}
		dur.WriteString("\n")
	}
	return writeAzureFiles(dir, "azure sample", &inv, &dur, &mem)
}
