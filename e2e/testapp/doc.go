// Package testapp is the workload the real-node benchmark scales: an HTTP
// service whose every request burns a set amount of CPU time and holds a set
// amount of memory while it is in flight, on top of a base, like Knative's
// autoscale-go (its prime and bloat parameters). It reports ready only after
// a start-up delay and exports Prometheus series that an MPA's spec.rl.slo
// and spec.goals.metrics read (see Metric names).
//
// # CPU time, not wall time
//
// A request's work is measured as the CPU time of the OS thread that does it
// (CLOCK_THREAD_CPUTIME_ID, with the goroutine locked to its thread), so
// time the thread spends preempted, or throttled by the CFS quota of a
// container at its limit, is not counted as work: a throttled request takes
// longer in wall time, exactly as a real CPU-bound service would.
//
// # Networking: SO_REUSEPORT
//
// The real node has no pod network, so the app's pods run in the host's
// network namespace, and the replicas of one Deployment all want the same
// port. With --reuse-port each replica opens its listener with SO_REUSEPORT:
// the kernel then spreads new connections across every live listener on
// that address (by a hash of the connection's 4-tuple), so a new replica
// receives new connections as soon as it listens, and a removed replica
// stops receiving them when it closes its listener on SIGTERM (it then
// finishes the requests in flight and exits). Connections queued on a
// listener but not yet accepted when it closes are reset by the kernel.
//
// The caveat is that a keep-alive connection stays with the replica that
// accepted it: a client that keeps its connections forever never reaches a
// new replica. The server therefore closes a connection after
// --max-requests-per-connection requests and after --idle-timeout of
// idleness, and the load generator (package loadgen) closes connections
// after a number of requests as well. Each replica's /metrics must be
// scraped on its own --metrics-address (a port of its own, found through
// --file-sd), since a scrape of the shared port reaches one replica at
// random.
package testapp
