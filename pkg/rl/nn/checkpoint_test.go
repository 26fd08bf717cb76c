package nn

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// trainedPolicy returns a learner with non-trivial weights and Adam state.
func trainedPolicy(t *testing.T, seed uint64) *PPO {
	t.Helper()
	p := mustPPO(t, smallConfig(4, 3, seed))
	rng := newRNG(seed)
	if _, err := p.BehaviourClone([]Demonstration{{State: randomState(rng, 4), Action: 1}, {State: randomState(rng, 4), Action: 2}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Update(randomBatch(rng, 50, 4, 3)); err != nil {
		t.Fatal(err)
	}
	return p
}

func requireSameProbs(t *testing.T, a, b *PPO) {
	t.Helper()
	rng := newRNG(99)
	for range 20 {
		s := randomState(rng, a.cfg.StateDim)
		da, err := a.Act(s, []bool{true, false, true}, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		db, err := b.Act(s, []bool{true, false, true}, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := range da.Probs {
			if da.Probs[i] != db.Probs[i] || da.Value != db.Value {
				t.Fatalf("state %v: probs %v value %v vs probs %v value %v", s, da.Probs, da.Value, db.Probs, db.Value)
			}
		}
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	orig := trainedPolicy(t, 1)
	data := mustMarshal(t, orig)

	t.Run("new learner from checkpoint", func(t *testing.T) {
		loaded, err := NewPPOFromCheckpoint(data)
		if err != nil {
			t.Fatal(err)
		}
		requireSameProbs(t, orig, loaded)
		requireSameBytes(t, "re-marshalled checkpoint", data, mustMarshal(t, loaded))
	})
	t.Run("into an existing learner", func(t *testing.T) {
		other := mustPPO(t, smallConfig(4, 3, 12345))
		if err := other.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		requireSameProbs(t, orig, other)
	})
	t.Run("training continues identically", func(t *testing.T) {
		a := trainedPolicy(t, 5)
		b, err := NewPPOFromCheckpoint(mustMarshal(t, a))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			batch := randomBatch(newRNG(uint64(100+i)), 70, 4, 3)
			if _, err := a.Update(batch); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Update(batch); err != nil {
				t.Fatal(err)
			}
		}
		requireSameBytes(t, "checkpoints after identical training", mustMarshal(t, a), mustMarshal(t, b))
	})
	t.Run("hyperparameters of the receiver are kept", func(t *testing.T) {
		cfg := smallConfig(4, 3, 1)
		cfg.LearningRate = 0.123
		other := mustPPO(t, cfg)
		if err := other.UnmarshalBinary(data); err != nil {
			t.Fatal(err)
		}
		if other.Config().LearningRate != 0.123 {
			t.Fatalf("learning rate = %v, want the receiver's 0.123", other.Config().LearningRate)
		}
	})
}

// reseal recomputes the checksum of a deliberately edited checkpoint so that
// the edit reaches the parser.
func reseal(b []byte) []byte {
	body := b[:len(b)-4]
	return binary.LittleEndian.AppendUint32(append([]byte(nil), body...), crc32.Checksum(body, crcTable))
}

func TestCheckpointErrors(t *testing.T) {
	orig := trainedPolicy(t, 1)
	data := mustMarshal(t, orig)
	mutated := func(f func([]byte) []byte) []byte { return f(append([]byte(nil), data...)) }
	versionOff := len(checkpointMagic)
	kindOff := versionOff + 4 + 2

	cases := []struct {
		name string
		data []byte
		cfg  Config // receiver for UnmarshalBinary
		want error
	}{
		{"empty", nil, smallConfig(4, 3, 1), ErrCorruptCheckpoint},
		{"truncated by one byte", data[:len(data)-1], smallConfig(4, 3, 1), ErrCorruptCheckpoint},
		{"truncated to half", data[:len(data)/2], smallConfig(4, 3, 1), ErrCorruptCheckpoint},
		{"flipped bit", mutated(func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }), smallConfig(4, 3, 1), ErrCorruptCheckpoint},
		{"bad magic", mutated(func(b []byte) []byte { b[0] = 'X'; return b }), smallConfig(4, 3, 1), ErrCorruptCheckpoint},
		{"trailing garbage", reseal(append(append([]byte(nil), data[:len(data)-4]...), 1, 2, 3, 0, 0, 0, 0)), smallConfig(4, 3, 1), ErrCorruptCheckpoint},
		{"future format version", mutated(func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[versionOff:], checkpointVersion+1)
			return reseal(b)
		}), smallConfig(4, 3, 1), ErrIncompatibleCheckpoint},
		{"other policy kind", mutated(func(b []byte) []byte { b[kindOff] = 'x'; return reseal(b) }), smallConfig(4, 3, 1), ErrIncompatibleCheckpoint},
		{"state dim mismatch", data, smallConfig(5, 3, 1), ErrIncompatibleCheckpoint},
		{"action count mismatch", data, smallConfig(4, 4, 1), ErrIncompatibleCheckpoint},
		{"hidden layers mismatch", data, func() Config { c := smallConfig(4, 3, 1); c.Hidden = []int{16}; return c }(), ErrIncompatibleCheckpoint},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPPO(t, tc.cfg)
			before := mustMarshal(t, p)
			err := p.UnmarshalBinary(tc.data)
			if !errors.Is(err, tc.want) {
				t.Fatalf("UnmarshalBinary: err = %v, want %v", err, tc.want)
			}
			requireSameBytes(t, "learner after a failed load", before, mustMarshal(t, p))
			if tc.cfg.sameArchitecture(orig.cfg) {
				if _, err := NewPPOFromCheckpoint(tc.data); !errors.Is(err, tc.want) {
					t.Fatalf("NewPPOFromCheckpoint: err = %v, want %v", err, tc.want)
				}
			}
		})
	}
}

// FuzzUnmarshalBinary: arbitrary bytes never panic and either load or fail
// with a checkpoint error. Each input is loaded as given and again with its
// checksum recomputed (reseal): a mutation of a checkpoint almost never keeps
// its CRC, so without the second load the fuzzer would only ever reach the
// checksum test, never the parser behind it.
//
// The learner is as small as a PPO gets (one hidden unit), so the seed
// checkpoint is about a kilobyte: with the 16x16 learner of the other tests
// (17 KB), every input that reached a new edge cost the fuzzer up to a
// minute of minimization, each candidate a copy and checksum of 17 KB, and
// fuzzing stalled (docs/fuzzing.md).
func FuzzUnmarshalBinary(f *testing.F) {
	tiny := smallConfig(2, 2, 1)
	tiny.Hidden = []int{1}
	p := mustPPO(f, tiny)
	f.Add(mustMarshal(f, p))
	f.Add([]byte(checkpointMagic))
	// One learner for all inputs: building Gorgonia graphs per input would
	// make the fuzzer crawl, and a failed load must leave it unchanged anyway
	// (a successful one leaves a learner of the same architecture).
	q := mustPPO(f, tiny)
	f.Fuzz(func(t *testing.T, data []byte) {
		inputs := [][]byte{data}
		if len(data) >= 4 {
			inputs = append(inputs, reseal(data))
		}
		for _, in := range inputs {
			if err := q.UnmarshalBinary(in); err != nil &&
				!errors.Is(err, ErrCorruptCheckpoint) && !errors.Is(err, ErrIncompatibleCheckpoint) {
				t.Fatalf("unexpected error class: %v", err)
			}
		}
	})
}
