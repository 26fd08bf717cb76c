package server

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/aware-k8s/aware/pkg/rl/learn"
	"github.com/aware-k8s/aware/pkg/rl/nn"
	"github.com/aware-k8s/aware/pkg/rl/store"
	pb "github.com/aware-k8s/aware/proto/aware/rlagent/v1"
)

// The agent's memory over hours (issue 36): what it keeps per workload and
// globally, in memory and in the state it restores, and the bound of each.
//
//   - the journal's records kept for compaction (journal.recent):
//     Options.KeepRecords (16384 of about 580 bytes, 9 MiB), whatever the
//     number of workloads; full after KeepRecords outcomes, 20 minutes at
//     200 workloads and 15-s ticks. A restart replays the log (up to
//     4×KeepRecords records) and keeps the last KeepRecords.
//   - each workload's lifecycle window (lifecycle.State.Window): its
//     gates' window of episode rewards, at most 1000 (Gates.Validate), in
//     the checkpoint too; full after window×episodeSteps ticks, which at
//     the soak's gates (1000 episodes of 2 ticks) is 8.3 hours. Over
//     those hours at 200 workloads they add up to 2 MiB of heap, and
//     grow the checkpoint from 0.7 to 2.9 MiB (13 bytes a reward), which
//     every checkpoint encodes anew; this is what still grows in a 2-hour
//     soak, across restarts and compactions.
//   - each workload's demonstrations (learn.Agent, paper action space
//     only): maxDemonstrations, one per tick the defaults act, so full
//     after 512 ticks (2.1 hours); rebuilt at a restart from what the log
//     still holds.
//   - each workload's episode (reset at every episode's end), request
//     rates (a ring of 20), last decision and constraints (bounds.cons,
//     at most MaxWorkloads); workloads themselves by MaxWorkloads.
//   - frozen copies of the policy: MaxFrozenPolicies; the shared policy,
//     its Adam state and training graphs: fixed by its architecture.
//   - metric series: label values are methods, codes, stages and
//     reasons, never workloads.
//
// TestRetainedMemoryPlateaus drives one server as the soak's recommender
// does and checks that, once these are full, the heap retained stops
// growing, restarts included.

// soakClock is the agent's clock in a simulated soak: it moves only when
// the driver steps it.
type soakClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *soakClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *soakClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// soakTick is the recommender's default interval.
const soakTick = 15 * time.Second

// soakDriver plays the recommender of the soak against one agent: every
// workload's decision and its outcome every tick of the agent's clock, the
// recommendation applied as the agent made it.
type soakDriver struct {
	clock     *soakClock
	workloads int
	// gates are every workload's gates once it left Bootstrapping;
	// before, bootstrap (nil: gates as well). The soak lets workloads out
	// of Bootstrapping at once, then widens the window so that they stay
	// in OnlineTraining (e2e holdGates).
	gates, bootstrap *pb.Gates
	tick             int
	mu               sync.Mutex
	bootstrapped     map[int]bool
}

func (d *soakDriver) obs(tick int) *pb.Observation {
	o := observation(0)
	o.Time = timestamppb.New(t0.Add(time.Duration(tick) * soakTick))
	o.Window.Seconds = int64(soakTick / time.Second)
	// A varying rate, so that states and rewards are not all alike.
	o.RequestRate = 100 + float64(tick%40)
	return o
}

func (d *soakDriver) config(w int) *pb.Config {
	g := d.gates
	d.mu.Lock()
	if d.bootstrap != nil && !d.bootstrapped[w] {
		g = d.bootstrap
	}
	d.mu.Unlock()
	return &pb.Config{Mode: pb.RLMode_RL_MODE_ON, Alpha: 0.5, Gates: g}
}

// step runs one tick of every workload, concurrently as the recommender's
// workers call, so that decisions share forward passes.
func (d *soakDriver) step(s *Server) error {
	d.clock.add(soakTick)
	tick := d.tick
	d.tick++
	var wg sync.WaitGroup
	errs := make(chan error, d.workloads)
	for w := range d.workloads {
		wg.Go(func() {
			name := fmt.Sprintf("soak-%04d", w)
			c := context.Background()
			r, err := s.Recommend(c, &pb.RecommendRequest{Workload: ref(name), Observation: d.obs(tick),
				Constraints:           &pb.Constraints{MinReplicas: 1, MaxReplicas: 10},
				DefaultRecommendation: defaultRec(), Config: d.config(w)})
			if err != nil {
				errs <- fmt.Errorf("%s, tick %d: recommend: %w", name, tick, err)
				return
			}
			out, err := s.ReportOutcome(c, &pb.ReportOutcomeRequest{Workload: ref(name), Observation: d.obs(tick),
				Applied: r.Recommendation, AppliedSource: r.Source, NextObservation: d.obs(tick + 1), Config: d.config(w)})
			if err != nil {
				errs <- fmt.Errorf("%s, tick %d: outcome: %w", name, tick, err)
				return
			}
			if out.Stage != pb.Stage_STAGE_BOOTSTRAPPING {
				d.mu.Lock()
				d.bootstrapped[w] = true
				d.mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	return nil
}

// newCheapPPO is a PPO in the paper's action space whose training jobs
// cost little: each cloning of a full demonstration buffer takes 4 steps
// rather than 128, so that the trainer keeps up with the driver.
func newCheapPPO(t testing.TB) Learner {
	t.Helper()
	cfg := nn.DefaultConfig(learn.StateDim, int(learn.NumActions))
	cfg.Epochs, cfg.MinibatchSize, cfg.Seed = 1, 128, 1
	p, err := nn.NewPPO(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// retained is one reading of what the agent keeps.
type retained struct {
	heap           uint64 // HeapAlloc after GC
	records        int    // the journal's records kept for compaction
	episodeRewards int    // in every workload's lifecycle window
	workloads      int
	constraints    int
}

func (r retained) String() string {
	return fmt.Sprintf("heap %.2f MiB, %d records kept, %d episode rewards in the windows, %d workloads, %d constraints",
		float64(r.heap)/mi, r.records, r.episodeRewards, r.workloads, r.constraints)
}

// measure reads s's retained heap, with the trainer idle so that no
// training job's batch is counted, and the sizes of its structures.
func measure(s *Server) retained {
	waitTrainerIdle(s)
	// Twice: objects with finalizers (gRPC, os.File) go only in the second.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r := retained{heap: ms.HeapAlloc, workloads: s.registry.len(), constraints: s.bounds.remembered()}
	s.journal.flushMu.Lock()
	r.records = len(s.journal.recent)
	s.journal.flushMu.Unlock()
	for _, st := range s.registry.states() {
		r.episodeRewards += len(st.Lifecycle.Window)
	}
	return r
}

// TestRetainedMemoryPlateaus drives one agent with a state directory as
// the soak's recommender drives it, 200 workloads every 15 s for hours of
// its clock, restarting it as the soak does, and reads its retained heap
// and its structures every 20 minutes. Once every bounded structure is
// full (warmUp), the heap must stop growing: a structure that grows with
// time, such as one entry per decision of ~10 bytes, moves it by more
// than the tolerance before the end, and a restart must not bring back
// more than was kept.
func TestRetainedMemoryPlateaus(t *testing.T) {
	workloads, keep := 200, DefaultOptions().KeepRecords
	if raceEnabled {
		// The race detector slows every call tenfold: fewer workloads,
		// and the journal kept in proportion, fill the same structures.
		workloads, keep = 25, keep/8
	}
	const reading = 20 * time.Minute / soakTick // ticks
	// hold keeps every workload in its stage: a promotion gate that no
	// window of rewards below 1 passes, and no retraining gate. Its window
	// of 40 episodes of 2 ticks is full after 80 ticks.
	hold := &pb.Gates{Window: 40, EpisodeSteps: 2, PromoteMinMean: 1, PromoteMaxStdDev: 0, RetrainBelowMean: -1, RetrainAboveStdDev: 2}
	for _, tc := range []struct {
		name    string
		learner func(testing.TB) Learner
		// gates while bootstrapping (nil: gates throughout) and after.
		bootstrap, gates *pb.Gates
		// warmUp is when every structure is full, ticks is the run's
		// length, restarts the ticks after which the agent restarts.
		warmUp, ticks int
		restarts      []int
		// stage every workload must be in at the end.
		stage pb.Stage
	}{{
		// The soak's agent: the binary's default policy, its workloads let
		// out of Bootstrapping after two episodes, as the soak's gates do,
		// then held in OnlineTraining, training every other tick. Full
		// after 82 ticks (the journal: keep/workloads) at most.
		name:    "residual PPO in OnlineTraining",
		learner: func(t testing.TB) Learner { return newResidualPPO(t, 1) },
		bootstrap: &pb.Gates{Window: 2, EpisodeSteps: 2, PromoteMinMean: -1, PromoteMaxStdDev: 2,
			RetrainBelowMean: -1, RetrainAboveStdDev: 2},
		gates:    hold,
		warmUp:   int(2 * reading),
		ticks:    int(9 * reading),
		restarts: []int{int(2*reading) + 1, int(5 * reading), int(8*reading) - 1},
		stage:    pb.Stage_STAGE_ONLINE_TRAINING,
	}, {
		// The paper's action space held in Bootstrapping: every tick adds
		// a demonstration until maxDemonstrations, at 512 ticks.
		name:     "paper PPO in Bootstrapping",
		learner:  newCheapPPO,
		gates:    hold,
		warmUp:   int(7 * reading),
		ticks:    int(10 * reading),
		restarts: []int{int(2 * reading), int(8*reading) + 1},
		stage:    pb.Stage_STAGE_BOOTSTRAPPING,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			clock := &soakClock{now: t0}
			d := &soakDriver{clock: clock, workloads: workloads, gates: tc.gates, bootstrap: tc.bootstrap, bootstrapped: map[int]bool{}}
			learner := tc.learner(t)
			open := func() (*Server, *store.Store) {
				st, _, err := store.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				o := DefaultOptions()
				o.Learner, o.Store, o.Now, o.Registerer = learner, st, clock.Now, prometheus.NewRegistry()
				o.KeepRecords = keep
				// The driver persists every 30 s of the agent's clock,
				// as the persister does at the default interval.
				o.FlushInterval = 24 * time.Hour
				s, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				return s, st
			}
			stop := func(s *Server, st *store.Store) {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if err := st.Close(); err != nil {
					t.Fatal(err)
				}
			}
			s, st := open()
			var plateau []retained
			started := time.Now()
			for tick := 1; tick <= tc.ticks; tick++ {
				if err := d.step(s); err != nil {
					t.Fatal(err)
				}
				if tick%2 == 0 {
					if err := s.persist(false); err != nil {
						t.Fatal(err)
					}
				}
				if tick%int(reading) == 0 || tick == tc.warmUp {
					r := measure(s)
					t.Logf("%4d min: %v (%s)", tick*int(soakTick/time.Second)/60, r, time.Since(started).Round(time.Second))
					if tick >= tc.warmUp {
						plateau = append(plateau, r)
					}
				}
				for _, at := range tc.restarts {
					if tick != at {
						continue
					}
					stop(s, st)
					// The restarted agent takes over the same policy
					// object; its weights are restored from the checkpoint.
					s, st = open()
					r := measure(s)
					t.Logf("restarted: %v", r)
					if tick >= tc.warmUp {
						// What a restart restores must be no more than
						// what was kept: it must not hold the log it
						// replayed, for instance.
						plateau = append(plateau, r)
					}
				}
			}
			defer stop(s, st)
			if len(plateau) < 4 {
				t.Fatalf("%d readings after the warm-up, want at least 4", len(plateau))
			}
			// Every structure is at its bound: the test measures the
			// plateau, not a fill still under way.
			wantRewards := workloads * int(tc.gates.Window)
			for _, r := range plateau {
				if r.records != keep || r.workloads != workloads || r.episodeRewards != wantRewards {
					t.Errorf("after the warm-up: %v; want %d records kept, %d workloads, %d episode rewards",
						r, keep, workloads, wantRewards)
				}
			}
			for w := range workloads {
				st, err := s.GetPolicyStatus(context.Background(), &pb.GetPolicyStatusRequest{Workload: ref(fmt.Sprintf("soak-%04d", w))})
				if err != nil {
					t.Fatal(err)
				}
				if st.Status.Stage != tc.stage {
					t.Fatalf("workload %d in stage %v, want %v: the run did not hold the stage it measures", w, st.Status.Stage, tc.stage)
				}
			}
			// The tolerance: 1 MiB, about 10 bytes per decision over the
			// plateau, well above the GC's noise (a few hundred KiB) and
			// well below the journal's fill (the records' size per 20
			// minutes) or a demonstration buffer's.
			const tolerance = 1 << 20
			base := plateau[0].heap
			for i, r := range plateau {
				if r.heap > base+tolerance {
					t.Errorf("reading %d after the warm-up: heap %.2f MiB, %.2f MiB above the plateau's first %.2f MiB (tolerance %.2f MiB)",
						i, float64(r.heap)/mi, float64(r.heap-base)/mi, float64(base)/mi, float64(tolerance)/mi)
				}
			}
		})
	}
}
