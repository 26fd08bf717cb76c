package server

import (
	"fmt"
	"sync"
	"sync/atomic"

	"k8s.io/klog/v2"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
)

// livePublisher is what the trainer needs from the pins: a place to put the
// frozen copy of every version it makes.
type livePublisher interface {
	setLive(fp *frozenPolicy)
}

// dirtyMarker is what the parts that change checkpointed state need from
// the checkpointer: a mark that the next periodic checkpoint must be
// written.
type dirtyMarker interface {
	markDirty()
}

var _ livePublisher = (*pinSet)(nil)

// trainer is the training part of the server: it owns the shared policy's
// weights (or the ensemble, which never trains) and their version, and
// runs the training jobs of completed episodes one at a time, off the
// request path, in its own goroutine.
//
// Invariants: version counts the training jobs applied to the policy since
// it was created; a job and its version bump are one step under mu, so
// policyState never sees weights of one version under the number of
// another; after every job the pins' live copy holds exactly the weights
// of the new version (frozen under mu). pending counts the jobs queued or
// running and drops only after a job's outcome is in the metrics. While mu
// is held the trainer takes no other part's lock (setLive and markDirty
// are atomic stores).
type trainer struct {
	learner Learner
	meta    *nn.MetaPPO
	ens     *ensemble
	metrics *metrics
	pins    livePublisher
	dirty   dirtyMarker

	jobs    chan *learn.TrainJob
	pending atomic.Int64
	mu      sync.Mutex
	version atomic.Int64
	// name caches versionString of the version last asked for: every
	// answer carries it, and it changes only when training lands.
	name atomic.Pointer[namedVersion]
}

type namedVersion struct {
	v    int64
	name string
}

func newTrainer(o *Options, ens *ensemble, m *metrics, pins livePublisher, dirty dirtyMarker) *trainer {
	return &trainer{learner: o.Learner, meta: o.MetaLearner, ens: ens, metrics: m, pins: pins, dirty: dirty,
		jobs: make(chan *learn.TrainJob, o.TrainQueue)}
}

// submit queues job for training, or drops it (and counts it) when the
// queue is full: experience keeps flowing and the next episode trains
// again. An ensemble does not train: its agents' jobs are not run.
func (t *trainer) submit(job *learn.TrainJob) {
	if t.ens != nil {
		return
	}
	t.pending.Add(1)
	select {
	case t.jobs <- job:
	default:
		t.pending.Add(-1)
		t.metrics.training.WithLabelValues("dropped").Inc()
	}
}

// run runs training jobs one at a time until stop is closed; jobs still
// queued then are dropped (their experience is in the log).
func (t *trainer) run(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case job := <-t.jobs:
			t.mu.Lock()
			err := t.train(job)
			if err == nil {
				// The copy a promotion pins from now on: taken under mu,
				// so its weights are exactly this version's.
				t.pins.setLive(newFrozenPolicy(t.version.Add(1), t.freezeLive()))
				t.dirty.markDirty()
			}
			t.mu.Unlock()
			if err != nil {
				t.metrics.training.WithLabelValues("failed").Inc()
				t.pending.Add(-1)
				klog.ErrorS(err, "Training job failed; the policy was rolled back")
				continue
			}
			t.metrics.training.WithLabelValues("ok").Inc()
			t.metrics.policyVersion.Set(float64(t.version.Load()))
			t.pending.Add(-1)
		}
	}
}

// train runs job on the shared policy; the caller holds mu.
func (t *trainer) train(job *learn.TrainJob) error {
	if t.meta != nil {
		return job.RunMeta(t.meta)
	}
	return job.Run(t.learner)
}

// freezeLive copies the weights the shared policy acts with now.
func (t *trainer) freezeLive() *nn.Frozen {
	if t.meta != nil {
		return t.meta.Freeze()
	}
	return t.learner.Freeze()
}

// publishLive makes the shared policy's weights now the copy promotions
// pin, at the current version; an ensemble has no shared policy to pin.
func (t *trainer) publishLive() {
	if t.ens == nil {
		t.pins.setLive(newFrozenPolicy(t.version.Load(), t.freezeLive()))
	}
}

// versionName names the policy's version, or the ensemble.
func (t *trainer) versionName() string {
	if t.ens != nil {
		return t.ens.name
	}
	v := t.version.Load()
	if n := t.name.Load(); n != nil && n.v == v {
		return n.name
	}
	n := &namedVersion{v: v, name: versionString(v)}
	t.name.Store(n)
	return n.name
}

func versionString(v int64) string { return fmt.Sprintf("v%d", v) }

// policyState returns the checkpoint of the shared policy of either kind
// and its version, as one step with respect to training.
func (t *trainer) policyState() ([]byte, int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b []byte
	var err error
	switch {
	case t.ens != nil:
		b, err = t.ens.checkpoint()
	case t.meta != nil:
		b, err = t.meta.MarshalBinary()
	default:
		b, err = t.learner.MarshalBinary()
	}
	return b, t.version.Load(), err
}

// restorePolicy loads a checkpointed policy and its version; before the
// trainer runs.
func (t *trainer) restorePolicy(b []byte, version int64) error {
	var err error
	switch {
	case t.ens != nil:
		err = t.ens.restore(b)
	case isEnsembleState(b):
		err = errEnsembleCheckpoint
	case t.meta != nil:
		err = t.meta.UnmarshalBinary(b)
	default:
		err = t.learner.UnmarshalBinary(b)
	}
	if err != nil {
		return err
	}
	t.version.Store(version)
	return nil
}

func isEnsembleState(b []byte) bool {
	_, ok := decodeEnsembleState(b)
	return ok
}
