package verify

import "github.com/rekeyhq/rekey/transform"

// Pieces returns, for each target, the snapshot pieces the first pass of
// cfg reads its old side in (0: one read of the whole range) and the new
// ranges it reads its new side in (nil: the whole range), so tests can see
// that a heavy entity was split and plant differences at the cuts.
func Pieces(cfg Config, targets []Target) (old []int, new [][]transform.KeyRange, err error) {
	cfg.fill()
	m, _, err := ChooseMethod(cfg.Program, cfg.Method)
	if err != nil {
		return nil, nil, err
	}
	if m == Both {
		m = Inverse
	}
	c := &comparison{cfg: &cfg, method: m, targets: targets}
	if c.oldR, err = ranges(targets, cfg.Program.SourceRange); err != nil {
		return nil, nil, err
	}
	if c.newR, err = ranges(targets, cfg.Program.TargetRange); err != nil {
		return nil, nil, err
	}
	if err := c.makePlans(); err != nil {
		return nil, nil, err
	}
	for _, p := range c.plans {
		old = append(old, len(p.old))
		new = append(new, p.new)
	}
	return old, new, nil
}
