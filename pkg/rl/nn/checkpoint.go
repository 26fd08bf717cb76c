package nn

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
)

// Checkpoint layout (all integers little-endian):
//
//	magic    [8]byte "AWAREPOL"
//	version  uint32  (checkpointVersion)
//	kind     uint16 length + bytes ("ppo", "ddpg")
//	config   uint32 length + JSON of the learner's config
//	params   uint32 count, then per parameter:
//	           name (uint16 length + bytes), rows uint32, cols uint32,
//	           adam steps uint64, weights, adam m, adam v (rows·cols float64 each)
//	rng      uint32 length + PCG state of the learner's generator
//	crc      uint32 CRC-32C of everything before it
//
// The checksum is verified before anything is parsed, so a torn or corrupted
// file is reported as such instead of producing a plausible-looking policy.
const (
	checkpointMagic   = "AWAREPOL"
	checkpointVersion = 1
	kindPPO           = "ppo"
)

// Checkpoint kinds, as CheckpointKind reports them.
const (
	KindPPO     = kindPPO
	KindMetaPPO = kindMetaPPO
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// CheckpointKind returns the kind of learner a checkpoint holds (KindPPO,
// KindMetaPPO, ...), after verifying its checksum and structure, so that a
// loader can pick the constructor before decoding it for real.
func CheckpointKind(data []byte) (string, error) {
	ck, err := decodeCheckpoint(data, "")
	if err != nil {
		return "", err
	}
	return ck.kind, nil
}

// MarshalBinary returns a checkpoint of the weights, the Adam state, the
// shuffle generator and the configuration. Restoring it and repeating the
// same calls gives bit-identical results.
func (p *PPO) MarshalBinary() ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rng, err := p.shufflePCG.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encoding shuffle state: %w", err)
	}
	return encodeCheckpoint(kindPPO, p.cfg, p.ps.all, rng)
}

// UnmarshalBinary restores a checkpoint taken by MarshalBinary. The
// checkpoint's architecture (StateDim, NumActions, Hidden) must match this
// learner's, otherwise an error wrapping ErrIncompatibleCheckpoint is
// returned; training hyperparameters stay those of this learner, so they can
// be changed across restarts. Nothing changes on error.
func (p *PPO) UnmarshalBinary(data []byte) error {
	cfg, ck, err := decodePPOCheckpoint(data)
	if err != nil {
		return err
	}
	if !p.cfg.sameArchitecture(cfg) {
		return fmt.Errorf("%w: checkpoint has stateDim=%d numActions=%d hidden=%v, learner has stateDim=%d numActions=%d hidden=%v",
			ErrIncompatibleCheckpoint, cfg.StateDim, cfg.NumActions, cfg.Hidden,
			p.cfg.StateDim, p.cfg.NumActions, p.cfg.Hidden)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.apply(ck); err != nil {
		return err
	}
	p.publish()
	return nil
}

// NewPPOFromCheckpoint creates a learner entirely from a checkpoint,
// including its configuration.
func NewPPOFromCheckpoint(data []byte) (*PPO, error) {
	cfg, ck, err := decodePPOCheckpoint(data)
	if err != nil {
		return nil, err
	}
	p, err := NewPPO(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.apply(ck); err != nil {
		return nil, err
	}
	p.publish()
	return p, nil
}

func decodePPOCheckpoint(data []byte) (Config, *checkpoint, error) {
	return decodeConfigCheckpoint[Config](data, kindPPO)
}

// decodeConfigCheckpoint decodes a checkpoint of kind and the learner
// configuration C stored in it, which must validate.
func decodeConfigCheckpoint[C interface{ Validate() error }](data []byte, kind string) (C, *checkpoint, error) {
	var cfg C
	ck, err := decodeCheckpoint(data, kind)
	if err != nil {
		return cfg, nil, err
	}
	if err := json.Unmarshal(ck.cfgJSON, &cfg); err != nil {
		var zero C
		return zero, nil, fmt.Errorf("%w: config: %w", ErrCorruptCheckpoint, err)
	}
	if err := cfg.Validate(); err != nil {
		var zero C
		return zero, nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	return cfg, ck, nil
}

// apply installs a decoded checkpoint. The caller holds p.mu.
func (p *PPO) apply(ck *checkpoint) error {
	if err := checkParams(p.ps.all, ck.params); err != nil {
		return err
	}
	if err := restorePCG(p.shufflePCG, ck.rng); err != nil {
		return err
	}
	copyParams(p.ps.all, ck.params)
	return nil
}

type checkpointParam struct {
	name       string
	rows, cols int
	steps      uint64
	data, m, v []float64
}

type checkpoint struct {
	kind    string
	cfgJSON []byte
	params  []checkpointParam
	rng     []byte
}

func encodeCheckpoint(kind string, cfg any, params []*param, rng []byte) ([]byte, error) {
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	size := 64 + len(kind) + len(cfgJSON) + len(rng)
	for _, q := range params {
		size += 32 + len(q.name) + 24*len(q.data)
	}
	le := binary.LittleEndian
	b := make([]byte, 0, size)
	b = append(b, checkpointMagic...)
	b = le.AppendUint32(b, checkpointVersion)
	b = le.AppendUint16(b, uint16(len(kind)))
	b = append(b, kind...)
	b = le.AppendUint32(b, uint32(len(cfgJSON)))
	b = append(b, cfgJSON...)
	b = le.AppendUint32(b, uint32(len(params)))
	for _, q := range params {
		b = le.AppendUint16(b, uint16(len(q.name)))
		b = append(b, q.name...)
		b = le.AppendUint32(b, uint32(q.rows))
		b = le.AppendUint32(b, uint32(q.cols))
		b = le.AppendUint64(b, q.steps)
		for _, xs := range [][]float64{q.data, q.m, q.v} {
			for _, x := range xs {
				b = le.AppendUint64(b, math.Float64bits(x))
			}
		}
	}
	b = le.AppendUint32(b, uint32(len(rng)))
	b = append(b, rng...)
	return le.AppendUint32(b, crc32.Checksum(b, crcTable)), nil
}

// checkParams verifies that a checkpoint's parameters fit dst exactly, so
// that a mismatch is reported before anything is overwritten.
func checkParams(dst []*param, src []checkpointParam) error {
	if len(src) != len(dst) {
		return fmt.Errorf("%w: checkpoint has %d parameters, learner has %d", ErrIncompatibleCheckpoint, len(src), len(dst))
	}
	for i, q := range dst {
		c := src[i]
		if c.name != q.name || c.rows != q.rows || c.cols != q.cols {
			return fmt.Errorf("%w: parameter %d is %s %dx%d, learner expects %s %dx%d",
				ErrIncompatibleCheckpoint, i, c.name, c.rows, c.cols, q.name, q.rows, q.cols)
		}
		for _, xs := range [][]float64{c.data, c.m, c.v} {
			if _, ok := allFinite(xs); !ok {
				return fmt.Errorf("%w: parameter %s holds non-finite values", ErrCorruptCheckpoint, c.name)
			}
		}
	}
	return nil
}

func copyParams(dst []*param, src []checkpointParam) {
	for i, q := range dst {
		copy(q.data, src[i].data)
		copy(q.m, src[i].m)
		copy(q.v, src[i].v)
		q.steps = src[i].steps
	}
}

// restorePCG loads a generator state, leaving the generator unchanged on
// error.
func restorePCG(pcg *rand.PCG, state []byte) error {
	var probe rand.PCG
	if err := probe.UnmarshalBinary(state); err != nil {
		return fmt.Errorf("%w: generator state: %w", ErrCorruptCheckpoint, err)
	}
	*pcg = probe
	return nil
}

func decodeCheckpoint(data []byte, wantKind string) (*checkpoint, error) {
	if len(data) < len(checkpointMagic)+8 {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrCorruptCheckpoint, len(data))
	}
	if string(data[:len(checkpointMagic)]) != checkpointMagic {
		return nil, fmt.Errorf("%w: not a policy checkpoint (bad magic)", ErrCorruptCheckpoint)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (stored %08x, computed %08x)", ErrCorruptCheckpoint, sum, got)
	}
	r := &reader{b: body[len(checkpointMagic):]}
	if v := r.u32(); r.err == nil && v != checkpointVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrIncompatibleCheckpoint, v, checkpointVersion)
	}
	kind := string(r.bytes(int(r.u16())))
	if r.err == nil && wantKind != "" && kind != wantKind {
		return nil, fmt.Errorf("%w: checkpoint holds a %q policy, want %q", ErrIncompatibleCheckpoint, kind, wantKind)
	}
	ck := &checkpoint{kind: kind, cfgJSON: r.bytes(int(r.u32()))}
	count := int(r.u32())
	for i := 0; i < count && r.err == nil; i++ {
		c := checkpointParam{name: string(r.bytes(int(r.u16())))}
		c.rows, c.cols = int(r.u32()), int(r.u32())
		c.steps = r.u64()
		// Bound the allocation by what is actually left in the input; rows and
		// cols are checked on their own first so that the product cannot
		// overflow.
		n := c.rows * c.cols
		if r.err == nil && (c.rows <= 0 || c.cols <= 0 || c.rows > r.remaining() || c.cols > r.remaining() || n > r.remaining()/24) {
			r.err = fmt.Errorf("parameter %q claims shape %dx%d with %d bytes left", c.name, c.rows, c.cols, r.remaining())
		}
		c.data, c.m, c.v = r.floats(n), r.floats(n), r.floats(n)
		ck.params = append(ck.params, c)
	}
	ck.rng = r.bytes(int(r.u32()))
	if r.err == nil && r.remaining() != 0 {
		r.err = fmt.Errorf("%d trailing bytes", r.remaining())
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, r.err)
	}
	return ck, nil
}

// reader decodes little-endian fields and remembers the first short read.
type reader struct {
	b   []byte
	off int
	err error
}

var errShort = errors.New("unexpected end of data")

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > r.remaining() {
		r.err = errShort
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *reader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (r *reader) floats(n int) []float64 {
	if r.err != nil {
		return nil
	}
	b := r.bytes(8 * n)
	if b == nil {
		return nil
	}
	out := make([]float64, n)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}
