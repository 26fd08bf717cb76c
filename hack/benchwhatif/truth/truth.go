// Package truth is what make bench-whatif's generated workloads are:
// workloads.json, written by hack/benchwhatif beside the history and read
// by the benchmark (recommender/app, build tag benchwhatif) to set the
// what-if's fits beside the truth.
package truth

import "time"

// Namespace, Container and Metric are what the benchmark's workloads are
// read by.
const (
	Namespace = "bench"
	Container = "app"
	Metric    = "http_request_duration_seconds"
)

// Workload is one generated Deployment and its truth.
type Workload struct {
	Name string `json:"name"`
	// CPUSeconds per request, IdleCPU per pod (cores), BaseMemory and
	// MemoryPerRequest (bytes) are the model the history is drawn from.
	CPUSeconds       float64 `json:"cpuSeconds"`
	IdleCPU          float64 `json:"idleCPU"`
	BaseMemory       float64 `json:"baseMemory"`
	MemoryPerRequest float64 `json:"memoryPerRequest"`
	// MeanRate is the mean request rate (requests/s).
	MeanRate float64 `json:"meanRate"`
	// RequestCPU (cores), RequestMemory (bytes) per pod; no limits.
	RequestCPU    float64 `json:"requestCPU"`
	RequestMemory float64 `json:"requestMemory"`
}

// Manifest is workloads.json.
type Manifest struct {
	Namespace string        `json:"namespace"`
	Container string        `json:"container"`
	Metric    string        `json:"metric"`
	Start     time.Time     `json:"start"`
	End       time.Time     `json:"end"`
	Step      time.Duration `json:"step"`
	Samples   int           `json:"samples"`
	Series    int           `json:"series"`
	Workloads []Workload    `json:"workloads"`
}
