package nn

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
)

// Frozen is an inference-only, immutable copy of a PPO or Meta-PPO policy:
// the weights it was acting with when Freeze was called, nothing else (no
// optimiser state, no training graphs). It decides exactly as the learner
// did at that moment, whatever the learner is trained on afterwards, which
// is what a workload that has stopped learning (lifecycle stage Serving)
// needs while the shared policy keeps training on other workloads.
//
// Frozen is safe for concurrent use.
type Frozen struct {
	kind string
	// Exactly one is set. They are learners stripped to their inference
	// weights (param.infer; data, Adam state and graphs are nil) and never
	// trained: acting goes through the learner's own code, so a frozen
	// decision is the learner's decision by construction, not by a second
	// implementation kept in step.
	ppo  *PPO
	meta *MetaPPO
}

// Freeze returns an immutable copy of the weights the learner acts with
// now. It costs one copy of the weights (Frozen.Weights float64 values) and
// waits only for a publication of new weights in progress.
func (p *PPO) Freeze() *Frozen {
	p.inferMu.RLock()
	ps := freezeParamSet(p.ps)
	p.inferMu.RUnlock()
	return &Frozen{kind: kindPPO, ppo: &PPO{cfg: p.cfg.clone(), ps: ps}}
}

// Freeze returns an immutable copy of the weights of actor, critic and
// encoder that the learner acts with now.
func (m *MetaPPO) Freeze() *Frozen {
	m.inferMu.RLock()
	ac := freezeParamSet(m.ac)
	enc := gruFrom(freezeParams(m.enc.params()))
	m.inferMu.RUnlock()
	// The auxiliary head only trains the encoder: a frozen policy, which
	// acts and never trains, has none.
	cfg := m.cfg.clone()
	cfg.AuxDim, cfg.AuxWeight = 0, 0
	cfg.Guard = m.Guard()
	return newFrozenMeta(cfg, ac, enc)
}

// newFrozenMeta builds the frozen Meta-PPO; cfg.Guard becomes its guard.
func newFrozenMeta(cfg MetaConfig, ac *paramSet, enc *gru) *Frozen {
	guard := cfg.Guard
	cfg.Guard = nil
	f := &Frozen{kind: kindMetaPPO, meta: &MetaPPO{cfg: cfg, acCfg: cfg.actorCritic(), ac: ac, enc: enc}}
	f.meta.guard.Store(guard)
	return f
}

// freezeParams copies the inference weights of ps; the copies hold nothing
// else. The caller holds the lock guarding the inference copies.
func freezeParams(ps []*param) []*param {
	out := make([]*param, len(ps))
	for i, p := range ps {
		out[i] = &param{name: p.name, rows: p.rows, cols: p.cols, infer: slices.Clone(p.infer)}
	}
	return out
}

func freezeParamSet(ps *paramSet) *paramSet {
	all := freezeParams(ps.all)
	return &paramSet{all: all, actor: all[:len(ps.actor)], critic: all[len(ps.actor):]}
}

// gruFrom assembles an encoder from its parameters in gru.params() order.
func gruFrom(ps []*param) *gru {
	return &gru{uz: ps[0], wz: ps[1], bz: ps[2], ur: ps[3], wr: ps[4], br: ps[5], uh: ps[6], wh: ps[7], bh: ps[8]}
}

// Kind returns KindPPO or KindMetaPPO.
func (f *Frozen) Kind() string { return f.kind }

// Config returns the frozen policy's configuration. For a PPO policy only
// the embedded Config is set (Window and EmbedDim are 0): such a policy
// reads no trajectory.
func (f *Frozen) Config() MetaConfig {
	if f.meta != nil {
		return f.meta.Config()
	}
	return MetaConfig{Config: f.ppo.cfg.clone()}
}

// params returns every weight in checkpoint order.
func (f *Frozen) params() []*param {
	if f.meta != nil {
		return append(slices.Clip(f.meta.ac.all), f.meta.enc.params()...)
	}
	return f.ppo.ps.all
}

// Weights returns the number of float64 weights the copy holds; its memory
// is 8 bytes per weight plus a few hundred bytes of headers.
func (f *Frozen) Weights() int {
	n := 0
	for _, p := range f.params() {
		n += len(p.infer)
	}
	return n
}

// ActBatch decides for many states in one forward pass, exactly as the
// learner's batched act did when the copy was taken: PPO.ActBatch (windows
// are then ignored and may be nil) or MetaPPO.ActWindowBatch (one window
// per state). Input is validated as the learner validates it, with errors
// wrapping ErrInvalidInput.
func (f *Frozen) ActBatch(states [][]float64, windows [][]Step, masks [][]bool, greedy bool, rng *rand.Rand) ([]Decision, error) {
	if f.meta != nil {
		return f.meta.ActWindowBatch(states, windows, masks, greedy, rng)
	}
	return f.ppo.ActBatch(states, masks, greedy, rng)
}

// Frozen serialisation (integers little-endian), the checkpoint framing
// without optimiser state or generator:
//
//	magic    [8]byte "AWAREFRZ"
//	version  uint32  (frozenVersion)
//	kind     uint16 length + bytes ("ppo", "meta-ppo")
//	config   uint32 length + JSON of Config or MetaConfig
//	params   uint32 count, then per parameter:
//	           name (uint16 length + bytes), rows uint32, cols uint32,
//	           weights (rows·cols float64)
//	crc      uint32 CRC-32C of everything before it
const (
	frozenMagic   = "AWAREFRZ"
	frozenVersion = 1
)

// MarshalBinary encodes the frozen policy for UnmarshalFrozen.
func (f *Frozen) MarshalBinary() ([]byte, error) {
	var cfg any
	if f.meta != nil {
		cfg = f.meta.Config()
	} else {
		cfg = f.ppo.cfg
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding config: %w", err)
	}
	ps := f.params()
	size := 32 + len(f.kind) + len(cfgJSON)
	for _, p := range ps {
		size += 16 + len(p.name) + 8*len(p.infer)
	}
	le := binary.LittleEndian
	b := make([]byte, 0, size)
	b = append(b, frozenMagic...)
	b = le.AppendUint32(b, frozenVersion)
	b = le.AppendUint16(b, uint16(len(f.kind)))
	b = append(b, f.kind...)
	b = le.AppendUint32(b, uint32(len(cfgJSON)))
	b = append(b, cfgJSON...)
	b = le.AppendUint32(b, uint32(len(ps)))
	for _, p := range ps {
		b = le.AppendUint16(b, uint16(len(p.name)))
		b = append(b, p.name...)
		b = le.AppendUint32(b, uint32(p.rows))
		b = le.AppendUint32(b, uint32(p.cols))
		for _, x := range p.infer {
			b = le.AppendUint64(b, math.Float64bits(x))
		}
	}
	return le.AppendUint32(b, crc32.Checksum(b, crcTable)), nil
}

// UnmarshalFrozen decodes a frozen policy written by Frozen.MarshalBinary.
// Bytes that fail the checksum or do not parse, or whose weights do not fit
// their own configuration or are not finite, give an error wrapping
// ErrCorruptCheckpoint; another format version or an unknown kind, one
// wrapping ErrIncompatibleCheckpoint. No training graph is built.
func UnmarshalFrozen(data []byte) (*Frozen, error) {
	if len(data) < len(frozenMagic)+8 {
		return nil, fmt.Errorf("%w: %d bytes is too short for a frozen policy", ErrCorruptCheckpoint, len(data))
	}
	if string(data[:len(frozenMagic)]) != frozenMagic {
		return nil, fmt.Errorf("%w: not a frozen policy (bad magic)", ErrCorruptCheckpoint)
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return nil, fmt.Errorf("%w: frozen policy checksum mismatch (stored %08x, computed %08x)", ErrCorruptCheckpoint, sum, got)
	}
	r := &reader{b: body[len(frozenMagic):]}
	if v := r.u32(); r.err == nil && v != frozenVersion {
		return nil, fmt.Errorf("%w: frozen policy format version %d, this build reads %d", ErrIncompatibleCheckpoint, v, frozenVersion)
	}
	kind := string(r.bytes(int(r.u16())))
	if r.err == nil && kind != kindPPO && kind != kindMetaPPO {
		return nil, fmt.Errorf("%w: frozen policy of kind %q", ErrIncompatibleCheckpoint, kind)
	}
	cfgJSON := r.bytes(int(r.u32()))
	var params []checkpointParam
	count := int(r.u32())
	for i := 0; i < count && r.err == nil; i++ {
		c := checkpointParam{name: string(r.bytes(int(r.u16())))}
		c.rows, c.cols = int(r.u32()), int(r.u32())
		// As in decodeCheckpoint: bound the allocation by what is left.
		n := c.rows * c.cols
		if r.err == nil && (c.rows <= 0 || c.cols <= 0 || c.rows > r.remaining() || c.cols > r.remaining() || n > r.remaining()/8) {
			r.err = fmt.Errorf("parameter %q claims shape %dx%d with %d bytes left", c.name, c.rows, c.cols, r.remaining())
		}
		c.data = r.floats(n)
		params = append(params, c)
	}
	if r.err == nil && r.remaining() != 0 {
		r.err = fmt.Errorf("%d trailing bytes", r.remaining())
	}
	if r.err != nil {
		return nil, fmt.Errorf("%w: frozen policy: %w", ErrCorruptCheckpoint, r.err)
	}
	return frozenFrom(kind, cfgJSON, params)
}

// FreezeCheckpoint returns the frozen policy of a PPO or Meta-PPO learner
// checkpoint (MarshalBinary of either) without building the learner or its
// graphs: the weights only, as a learner restored from it would act.
func FreezeCheckpoint(data []byte) (*Frozen, error) {
	ck, err := decodeCheckpoint(data, "")
	if err != nil {
		return nil, err
	}
	if ck.kind != kindPPO && ck.kind != kindMetaPPO {
		return nil, fmt.Errorf("%w: cannot freeze a %q policy", ErrIncompatibleCheckpoint, ck.kind)
	}
	return frozenFrom(ck.kind, ck.cfgJSON, ck.params)
}

// frozenFrom builds a frozen policy of kind from its configuration and the
// weights of its parameters (checkpointParam.data), which must be exactly
// the layout the configuration implies.
func frozenFrom(kind string, cfgJSON []byte, params []checkpointParam) (*Frozen, error) {
	var mc MetaConfig
	switch kind {
	case kindPPO:
		if err := json.Unmarshal(cfgJSON, &mc.Config); err != nil {
			return nil, fmt.Errorf("%w: config: %w", ErrCorruptCheckpoint, err)
		}
		if err := mc.Config.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
		}
	case kindMetaPPO:
		if err := json.Unmarshal(cfgJSON, &mc); err != nil {
			return nil, fmt.Errorf("%w: config: %w", ErrCorruptCheckpoint, err)
		}
		if err := mc.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
		}
	}
	layout := frozenLayout(kind, mc)
	if len(params) != len(layout) {
		return nil, fmt.Errorf("%w: %d parameters, the configuration implies %d", ErrCorruptCheckpoint, len(params), len(layout))
	}
	for i, q := range layout {
		c := params[i]
		if c.name != q.name || c.rows != q.rows || c.cols != q.cols {
			return nil, fmt.Errorf("%w: parameter %d is %s %dx%d, the configuration implies %s %dx%d",
				ErrCorruptCheckpoint, i, c.name, c.rows, c.cols, q.name, q.rows, q.cols)
		}
		if _, ok := allFinite(c.data); !ok {
			return nil, fmt.Errorf("%w: parameter %s holds non-finite values", ErrCorruptCheckpoint, c.name)
		}
		q.infer = c.data
	}
	if kind == kindPPO {
		nActor := 2 * (len(mc.Hidden) + 1)
		return &Frozen{kind: kindPPO, ppo: &PPO{cfg: mc.Config, ps: &paramSet{all: layout, actor: layout[:nActor], critic: layout[nActor:]}}}, nil
	}
	nAC := 4 * (len(mc.Hidden) + 1)
	ac := &paramSet{all: layout[:nAC:nAC], actor: layout[:nAC/2], critic: layout[nAC/2 : nAC]}
	return newFrozenMeta(mc, ac, gruFrom(layout[nAC:])), nil
}

// frozenLayout lists the parameters (names and shapes, no values) of a
// policy of kind and configuration cfg, in checkpoint order: what
// newActorCriticParams and newGRU create, without their optimiser state,
// tensors or random initialisation.
func frozenLayout(kind string, cfg MetaConfig) []*param {
	in := cfg.StateDim
	if kind == kindMetaPPO {
		in += cfg.EmbedDim
	}
	mlp := func(prefix string, out int) []*param {
		widths := append(append([]int{in}, cfg.Hidden...), out)
		var ps []*param
		for l := 0; l+1 < len(widths); l++ {
			ps = append(ps,
				&param{name: fmt.Sprintf("%s/w%d", prefix, l), rows: widths[l], cols: widths[l+1]},
				&param{name: fmt.Sprintf("%s/b%d", prefix, l), rows: 1, cols: widths[l+1]})
		}
		return ps
	}
	ps := append(mlp("actor", cfg.NumActions), mlp("critic", 1)...)
	if kind == kindMetaPPO {
		e, d := cfg.EmbedDim, cfg.stepDim()
		for _, g := range []string{"z", "r", "h"} {
			ps = append(ps,
				&param{name: "gru/u" + g, rows: e, cols: e},
				&param{name: "gru/w" + g, rows: d, cols: e},
				&param{name: "gru/b" + g, rows: 1, cols: e})
		}
	}
	return ps
}
