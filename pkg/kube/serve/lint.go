package serve

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// LintMetrics checks every metric family in g: Prometheus naming rules
// (promlint: units, _total on counters, help text) and the project rule
// that a component's metrics are named aware_<component>_<name>_<unit>.
// Families from the Go and process collectors are exempt. Tests of each
// component call it on the registry the component registers into.
func LintMetrics(g prometheus.Gatherer, component string) error {
	mfs, err := g.Gather()
	if err != nil {
		return fmt.Errorf("gather: %w", err)
	}
	prefix := "aware_" + strings.ReplaceAll(component, "-", "") + "_"
	var errs []error
	for _, mf := range mfs {
		name := mf.GetName()
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue
		}
		if !strings.HasPrefix(name, prefix) {
			errs = append(errs, fmt.Errorf("metric %s: name must start with %s", name, prefix))
		}
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		return fmt.Errorf("lint: %w", err)
	}
	for _, p := range problems {
		errs = append(errs, fmt.Errorf("metric %s: %s", p.Metric, p.Text))
	}
	return errors.Join(errs...)
}
