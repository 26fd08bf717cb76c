// Package loadgen is the load generator of the real-node benchmark. It
// replays a rate series (from a CSV file or one of the simulator's trace
// kinds) against a loopback HTTP target with open-loop Poisson arrivals: the
// arrival times are drawn in advance from the series and a seeded random
// source, so a slow server never delays the next request (no coordinated
// omission), and one seed always gives the same arrival times. Vegeta's
// Attacker sends the requests (PoissonPacer is its Pacer); a request without
// an answer within the timeout is lost. It measures client-side latency,
// exports aware_loadgen_* series to Prometheus and writes one JSON record
// per window (Record) for the benchmark to read.
//
// Its traffic is bounded: a duration of at most MaxDuration, a total
// request count and a peak rate, and it sends to loopback addresses only:
// the URL's host must be localhost or a loopback IP, and every connection's
// resolved address is checked again when it is dialled.
//
// Connections are closed after a number of requests (a "Connection: close"
// header on every Nth request), because a keep-alive connection sticks to
// the replica that accepted it: with replicas sharing a port through
// SO_REUSEPORT (package testapp), only new connections reach new replicas.
package loadgen
