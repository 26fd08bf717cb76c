package sim

// Prices turn allocations into one cost figure. Only the ratio matters for
// comparisons; the defaults are the on-demand ratio of general-purpose cloud
// VMs, where one core costs about as much as 7.5 GiB of memory.
type Prices struct {
	CoreHour float64
	GiBHour  float64
}

// DefaultPrices returns 1 per core-hour and 1/7.5 per GiB-hour.
func DefaultPrices() Prices { return Prices{CoreHour: 1, GiBHour: 1 / 7.5} }

// Cost returns the price of holding cores and bytes for seconds.
func (p Prices) Cost(cores, bytes, seconds float64) float64 {
	return (cores*p.CoreHour + bytes/gib*p.GiBHour) * seconds / 3600
}

// GiB is the number of bytes in a gibibyte.
const GiB = gib

// MiB is the number of bytes in a mebibyte.
const MiB = mib
