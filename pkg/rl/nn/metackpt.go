package nn

import (
	"fmt"
)

// MarshalBinary returns a checkpoint (format as PPO's, kind "meta-ppo") of
// the weights of actor, critic and encoder, the Adam state, the shuffle
// generator and the configuration.
func (m *MetaPPO) MarshalBinary() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng, err := m.shufflePCG.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encoding shuffle state: %w", err)
	}
	cfg := m.cfg
	cfg.Guard = m.guard.Load()
	return encodeCheckpoint(kindMetaPPO, cfg, m.all, rng)
}

// UnmarshalBinary restores a checkpoint taken by MarshalBinary. The
// architecture (StateDim, NumActions, Heads, Hidden, Window, EmbedDim,
// AuxDim) must match, otherwise an error wrapping ErrIncompatibleCheckpoint
// is returned; training hyperparameters stay this learner's, the guard
// becomes the checkpoint's (none if it has none). Nothing changes on error.
func (m *MetaPPO) UnmarshalBinary(data []byte) error {
	cfg, ck, err := decodeMetaCheckpoint(data)
	if err != nil {
		return err
	}
	if !m.cfg.sameArchitecture(cfg) {
		return fmt.Errorf("%w: checkpoint has stateDim=%d numActions=%d heads=%v hidden=%v window=%d embedDim=%d auxDim=%d, learner has stateDim=%d numActions=%d heads=%v hidden=%v window=%d embedDim=%d auxDim=%d",
			ErrIncompatibleCheckpoint, cfg.StateDim, cfg.NumActions, cfg.heads(), cfg.Hidden, cfg.Window, cfg.EmbedDim, cfg.AuxDim,
			m.cfg.StateDim, m.cfg.NumActions, m.cfg.heads(), m.cfg.Hidden, m.cfg.Window, m.cfg.EmbedDim, m.cfg.AuxDim)
	}
	if err := cfg.Guard.validate(m.cfg); err != nil {
		return fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.apply(ck); err != nil {
		return err
	}
	m.guard.Store(cfg.Guard)
	m.publish()
	return nil
}

// NewMetaPPOFromCheckpoint creates a learner entirely from a checkpoint,
// including its configuration.
func NewMetaPPOFromCheckpoint(data []byte) (*MetaPPO, error) {
	cfg, ck, err := decodeMetaCheckpoint(data)
	if err != nil {
		return nil, err
	}
	m, err := NewMetaPPO(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCheckpoint, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.apply(ck); err != nil {
		return nil, err
	}
	m.publish()
	return m, nil
}

func decodeMetaCheckpoint(data []byte) (MetaConfig, *checkpoint, error) {
	return decodeConfigCheckpoint[MetaConfig](data, kindMetaPPO)
}

func (m *MetaPPO) apply(ck *checkpoint) error {
	if err := checkParams(m.all, ck.params); err != nil {
		return err
	}
	if err := restorePCG(m.shufflePCG, ck.rng); err != nil {
		return err
	}
	copyParams(m.all, ck.params)
	return nil
}
