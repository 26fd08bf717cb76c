package server

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/rl/learn"
)

// workloadIndex is what the journal needs from the registry: which
// workloads are still tracked, and their agents to replay experience into.
type workloadIndex interface {
	known(rs []record) []record
	lookup(key string) *learn.Agent
}

var _ workloadIndex = (*registry)(nil)

// journal is the experience-log part of the server: it batches the
// experience records of ReportOutcome, appends them to the store, keeps
// the last KeepRecords of them, and compacts the log to those.
//
// Invariants: a record is appended at most once, and a batch whose append
// failed is kept, ahead of newer records, for the next flush; records of
// workloads the registry no longer tracks are neither appended nor kept
// through a compaction; the log holds at most about 4×KeepRecords records
// between compactions, and a compaction follows every forgotten workload.
// flushMu orders flushes and guards recent and written; expMu guards
// pending only, and is held only to take or return a batch, so a
// ReportOutcome never waits for an fsync. Lock order: flushMu, then expMu
// or the registry's mu (in known), never both of the latter.
type journal struct {
	store        Store // nil: experience is dropped at flush
	metrics      *metrics
	keep         int
	flushRecords int
	workloads    workloadIndex
	// flushC asks the persister for an early flush.
	flushC chan struct{}

	expMu   sync.Mutex
	pending []record // experience not yet appended to the store
	flushMu sync.Mutex
	recent  []record // the last keep records, for compaction; flushMu
	written int      // records in the log since the last compaction; flushMu
	// forgotten counts workloads forgotten since the log was last
	// compacted; the next flush compacts their experience away.
	forgotten atomic.Int64
}

func newJournal(o *Options, m *metrics, workloads workloadIndex) *journal {
	return &journal{store: o.Store, metrics: m, keep: o.KeepRecords, flushRecords: o.FlushRecords, workloads: workloads,
		flushC: make(chan struct{}, 1)}
}

// record is one experience record and the workload it belongs to, so that
// the records of a forgotten workload can be left out of the log.
type record struct {
	key string
	b   []byte
}

func recordBytes(rs []record) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r.b
	}
	return out
}

// add queues key's record for the next flush, asking for it early once
// flushRecords are pending.
func (j *journal) add(key string, rec []byte) {
	j.expMu.Lock()
	j.pending = append(j.pending, record{key: key, b: rec})
	n := len(j.pending)
	j.expMu.Unlock()
	if n >= j.flushRecords {
		select {
		case j.flushC <- struct{}{}:
		default:
		}
	}
}

// forgot notes that a workload was forgotten: the next flush compacts.
func (j *journal) forgot() { j.forgotten.Add(1) }

// flush appends the pending experience to the store and compacts the log
// when it has grown, or workloads were forgotten.
func (j *journal) flush() error {
	// flushMu orders flushes (and compactions); expMu is held only to take
	// the pending batch, so ReportOutcome never waits for an fsync.
	j.flushMu.Lock()
	defer j.flushMu.Unlock()
	j.expMu.Lock()
	batch := j.pending
	j.pending = nil
	j.expMu.Unlock()
	if j.store == nil {
		return nil
	}
	// Records of workloads forgotten since they were recorded are not
	// worth writing.
	batch = j.workloads.known(batch)
	if len(batch) > 0 {
		if err := j.store.Append(recordBytes(batch)); err != nil {
			j.metrics.persist.WithLabelValues("experience", "failed").Inc()
			// Keep the batch, ahead of what arrived meanwhile, for the next try.
			j.expMu.Lock()
			j.pending = append(batch, j.pending...)
			j.expMu.Unlock()
			return fmt.Errorf("append experience: %w", err)
		}
		j.metrics.persist.WithLabelValues("experience", "ok").Inc()
		j.recent = append(j.recent, batch...)
		j.written += len(batch)
		if over := len(j.recent) - j.keep; over > 0 {
			// Delete, not a reslice: it zeroes the vacated tail, whose
			// records would otherwise stay reachable through the array.
			j.recent = slices.Delete(j.recent, 0, over)
		}
	}
	// Compact once the log holds four times what we keep, so that the log
	// stays bounded and compaction costs O(1) amortised per record; and
	// after workloads were forgotten, so that their experience leaves the
	// state directory too.
	forgotten := j.forgotten.Swap(0)
	if j.written >= 4*j.keep || forgotten > 0 {
		keep := j.workloads.known(j.recent)
		if err := j.store.Compact(recordBytes(keep)); err != nil {
			j.forgotten.Add(forgotten)
			return fmt.Errorf("compact experience: %w", err)
		}
		j.recent = keep
		j.written = len(keep)
	}
	return nil
}

// replay replays the experience log recovered at open into the agents'
// demonstration buffers and, for Meta-PPO, their trajectories, and keeps
// the last records for compaction; before the server serves. It returns
// the number of records and of those whose workload is gone.
func (j *journal) replay() (all, orphans int) {
	recovered := j.store.Experience()
	recs := make([]record, 0, len(recovered))
	for _, r := range recovered {
		e, err := learn.UnmarshalExperience(r)
		if err != nil {
			// One undecodable record (e.g. from an older state layout)
			// must not cost the rest.
			klog.ErrorS(err, "Skipping experience record")
			continue
		}
		a := j.workloads.lookup(e.Workload)
		if a == nil {
			// A workload forgotten before the log was compacted.
			orphans++
			continue
		}
		a.Restore(e)
		recs = append(recs, record{key: e.Workload, b: r})
	}
	if orphans > 0 {
		// The next flush compacts them away.
		j.forgot()
	}
	if over := len(recs) - j.keep; over > 0 {
		// A copy: recs[over:] would keep every recovered record (up to
		// 4×keep, the whole log) reachable through its backing array, for
		// as long as later flushes fit in its spare capacity, which the
		// skipped and orphaned records leave; with many of them, until
		// the next restart.
		recs = slices.Clone(recs[over:])
	}
	j.flushMu.Lock()
	j.recent = recs
	j.written = len(recovered)
	j.flushMu.Unlock()
	return len(recovered), orphans
}
