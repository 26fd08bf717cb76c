// Package fuzz holds the fuzz target of pkg/kube/usage's Prometheus source
// (FuzzPrometheusResponse) and nothing else. It is apart from pkg/kube/usage's
// own tests because a fuzz target is linked with every test of its package:
// there, the metrics.k8s.io fake clientset and the other fixtures put
// 331,570 coverage counters in the test binary, here 137,290, and Go's
// fuzzer pays for every counter on every execution (docs/fuzzing.md). It
// uses only pkg/kube/usage's exported API, as the recommender does.
package fuzz
