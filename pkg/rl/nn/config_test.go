package nn

import (
	"math"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(*Config)
		wantErr bool
	}{
		{"defaults", func(*Config) {}, false},
		{"zero state dim", func(c *Config) { c.StateDim = 0 }, true},
		{"one action", func(c *Config) { c.NumActions = 1 }, true},
		{"no hidden layers", func(c *Config) { c.Hidden = nil }, true},
		{"zero-width layer", func(c *Config) { c.Hidden = []int{8, 0} }, true},
		{"huge layer", func(c *Config) { c.Hidden = []int{1 << 20} }, true},
		{"NaN learning rate", func(c *Config) { c.LearningRate = math.NaN() }, true},
		{"negative learning rate", func(c *Config) { c.LearningRate = -1 }, true},
		{"clip epsilon one", func(c *Config) { c.ClipEpsilon = 1 }, true},
		{"gamma above one", func(c *Config) { c.Gamma = 1.01 }, true},
		{"gamma one is allowed", func(c *Config) { c.Gamma = 1 }, false},
		{"negative lambda", func(c *Config) { c.Lambda = -0.1 }, true},
		{"negative entropy", func(c *Config) { c.EntropyCoef = -0.1 }, true},
		{"zero entropy is allowed", func(c *Config) { c.EntropyCoef = 0 }, false},
		{"zero value coef", func(c *Config) { c.ValueCoef = 0 }, true},
		{"infinite grad norm", func(c *Config) { c.MaxGradNorm = math.Inf(1) }, true},
		{"zero epochs", func(c *Config) { c.Epochs = 0 }, true},
		{"zero minibatch", func(c *Config) { c.MinibatchSize = 0 }, true},
		{"negative target KL", func(c *Config) { c.TargetKL = -1 }, true},
		{"beta2 one", func(c *Config) { c.AdamBeta2 = 1 }, true},
		{"zero adam epsilon", func(c *Config) { c.AdamEpsilon = 0 }, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(4, 3)
			tc.mutate(&cfg)
			err := cfg.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Validate() = %v, wantErr %v", err, tc.wantErr)
			}
			if _, nerr := NewPPO(cfg); (nerr != nil) != tc.wantErr {
				t.Fatalf("NewPPO error = %v, wantErr %v", nerr, tc.wantErr)
			}
		})
	}
}

func TestConfigIsCopied(t *testing.T) {
	cfg := DefaultConfig(4, 3)
	p := mustPPO(t, cfg)
	cfg.Hidden[0] = 1
	got := p.Config()
	if got.Hidden[0] != 64 {
		t.Fatalf("learner config aliased the caller's Hidden slice: %v", got.Hidden)
	}
	got.Hidden[1] = 2
	if p.Config().Hidden[1] != 64 {
		t.Fatalf("Config() returned an aliased Hidden slice")
	}
}
