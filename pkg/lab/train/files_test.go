package train

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aware-k8s/aware/pkg/lab/sim"
)

// TestTrainOnFiles: episodes cycle through an Azure sample of part of a
// day and a rate series, each a stretch of its file, and a file shorter
// than an episode is refused rather than padded.
func TestTrainOnFiles(t *testing.T) {
	dir := t.TempDir()
	files, err := sim.WriteAzureSample(dir, sim.AzureSampleOptions{Functions: 20, FirstMinute: 600, Minutes: 30, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	series := filepath.Join(dir, "rates.csv")
	if err := os.WriteFile(series, []byte("0,2\n60,4\n120,6\n180,3\n240,1\n300,2\n360,5\n420,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := tiny()
	o.Traces = []string{"steady"}
	o.Azure, o.AzureRate, o.Series = files, sim.AzureRateRecorded, sim.SeriesFile{Path: series}
	o.Episodes = 9
	res := mustTrain(t, o)
	kinds := map[string]int{}
	for _, e := range res.Episodes {
		kinds[e.Trace]++
	}
	for _, k := range []string{"steady", string(AzureTrace), string(SeriesTrace)} {
		if kinds[k] == 0 {
			t.Errorf("no %s episode among %v", k, kinds)
		}
	}

	o.EpisodeSteps = 200 // the series covers 32 windows of 15 s, the sample 120
	if _, err := Train(t.Context(), o); err == nil || !strings.Contains(err.Error(), "fewer than an episode's 201") {
		t.Errorf("an episode longer than the files: %v", err)
	}
}
