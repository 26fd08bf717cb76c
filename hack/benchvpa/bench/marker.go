package bench

import "strings"

// LoopMarker recognises, among the API requests of one loop component, the
// one request it makes exactly once at the start of every loop, so the
// harness can find loop boundaries on the wire (in its counting proxy)
// instead of scraping the component's /metrics, which would cost the
// component CPU inside the very window being measured. It returns nil for
// a component it does not know.
//
//   - both recommenders list metrics.k8s.io PodMetrics once per loop, before
//     they compute anything (ours: the loop's readUsage; VPA's:
//     LoadRealTimeMetrics);
//   - both updaters read their admission controller's status Lease once per
//     loop, before they look at any autoscaler (ours: the heartbeat Lease
//     named by --heartbeat-lease-name; VPA's: kube-system/vpa-admission-controller).
//
// The harness checks the count of markers against the component's own loop
// counter after each window (outside it), so a component that made the
// request twice in a loop is reported, not silently mis-measured.
func LoopMarker(component string) func(method, path string, watch bool) bool {
	var want func(path string) bool
	switch component {
	case "aware-recommender", "vpa-recommender":
		want = func(p string) bool {
			return strings.HasPrefix(p, "/apis/metrics.k8s.io/") && strings.HasSuffix(p, "/pods")
		}
	case "aware-updater":
		want = func(p string) bool { return strings.HasSuffix(p, "/leases/aware-admission-controller") }
	case "vpa-updater":
		want = func(p string) bool { return strings.HasSuffix(p, "/leases/vpa-admission-controller") }
	default:
		return nil
	}
	return func(method, path string, watch bool) bool {
		return method == "GET" && !watch && strings.HasPrefix(path, "/apis/") && want(path)
	}
}

// MarkersMatchLoops says whether markers loop-start requests seen so far
// agree with loops, a component's count of completed loops read just after
// the last marker: the loop the last marker started may or may not have
// ended by then.
func MarkersMatchLoops(markers int64, loops float64) bool {
	return loops == float64(markers) || loops == float64(markers-1)
}
