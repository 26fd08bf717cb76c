package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteAzureFixture writes n synthetic functions (two per app) in the three
// Azure Functions 2019 file formats into dir and returns their names. The
// values are drawn from seed: diurnal invocation counts, execution times of
// 5 ms to 2 s, and memory of 60 to 400 MB. Tests and examples use it, so the
// project ships no copy of the real trace.
func WriteAzureFixture(dir string, n int, seed uint64) (AzureFiles, error) {
	rng := rand.New(rand.NewPCG(seed, splitmix(seed^0x617a757265)))
	var inv, dur, mem bytes.Buffer
	inv.WriteString(strings.Join(azureInvocations.columns, ","))
	for m := 1; m <= AzureMinutes; m++ {
		inv.WriteString("," + strconv.Itoa(m))
	}
	inv.WriteString("\n")
	dur.WriteString(strings.Join(azureDurations.columns, ",") + "\n")
	mem.WriteString(strings.Join(azureMemory.columns, ",") + "\n")
	for i := range n {
		owner, app, fn := fmt.Sprintf("owner%02d", i/2), fmt.Sprintf("app%02d", i/2), fmt.Sprintf("fn%03d", i)
		fmt.Fprintf(&inv, "%s,%s,%s,http", owner, app, fn)
		peak, phase := 5+rng.Float64()*200, rng.Float64()*2*math.Pi
		for m := range AzureMinutes {
			mean := peak * (0.55 + 0.45*math.Sin(2*math.Pi*float64(m)/AzureMinutes+phase))
			fmt.Fprintf(&inv, ",%d", int(mean*(0.8+0.4*rng.Float64())))
		}
		inv.WriteString("\n")
		avg := 5 * math.Exp(rng.Float64()*math.Log(400)) // 5 ms to 2 s
		ps := []float64{0.2, 0.4, 0.7, 0.9, 1.2, 3, 6}
		fmt.Fprintf(&dur, "%s,%s,%s,%.0f,%d,%.0f,%.0f", owner, app, fn, avg, 1000+rng.IntN(100000), avg*ps[0], avg*ps[6])
		for _, p := range ps {
			fmt.Fprintf(&dur, ",%.0f", avg*p)
		}
		dur.WriteString("\n")
		if i%2 == 0 {
			base := 60 + rng.Float64()*200
			fmt.Fprintf(&mem, "%s,%s,%d,%.1f", owner, app, 100+rng.IntN(1000), base*1.2)
			for _, p := range []float64{1, 1.05, 1.12, 1.2, 1.3, 1.45, 1.6, 1.8} {
				fmt.Fprintf(&mem, ",%.1f", base*p)
			}
			mem.WriteString("\n")
		}
	}
	return writeAzureFiles(dir, "azure fixture", &inv, &dur, &mem)
}

// writeAzureFiles writes the three files of one day in the Azure Functions
// 2019 trace's names into dir; what names the writer in errors.
func writeAzureFiles(dir, what string, inv, dur, mem *bytes.Buffer) (AzureFiles, error) {
	f := AzureFiles{
		Invocations: filepath.Join(dir, "invocations_per_function_md.anon.d01.csv"),
		Durations:   filepath.Join(dir, "function_durations_percentiles.anon.d01.csv"),
		Memory:      filepath.Join(dir, "app_memory_percentiles.anon.d01.csv"),
	}
	for _, out := range []struct {
		path string
		b    *bytes.Buffer
	}{{f.Invocations, inv}, {f.Durations, dur}, {f.Memory, mem}} {
		if err := os.WriteFile(out.path, out.b.Bytes(), 0o644); err != nil {
			return AzureFiles{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	return f, nil
}
