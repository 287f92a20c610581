package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/state"
)

// A panel run belongs to the instance running it (panelValue.Owner, set
// when it starts and with every step it saves). A run whose instance is
// gone from the membership (killed, or stopped past its grace) is taken
// over by the first live instance that lists it, by a revision-checked
// update of its owner, and resumed there at the turn it saved last.

// RunningPanels claims, for this instance, the running panel runs whose
// instance is gone (or is this one's name, from an earlier process), and
// returns them to be resumed (panel/host.Resumable). While NATS is or
// was lately away it claims none: their instances may be coming back too.
func (s *State) RunningPanels(ctx context.Context) ([]state.PanelRun, error) {
	c := s.c
	if !c.health.quiet(c.cfg.MemberTTL) {
		return nil, nil
	}
	keys, err := c.panels.Keys(ctx)
	switch {
	case errors.Is(err, jsapi.ErrNoKeysFound):
		return nil, nil
	case unavailable(err):
		c.health.failed("list panel runs", err) // the next look, when NATS is back
		return nil, nil
	case err != nil:
		return nil, err
	}
	var out []state.PanelRun
	for _, k := range keys {
		if !strings.HasPrefix(k, "run.") {
			continue
		}
		if r, ok := s.claimRun(ctx, k); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// claimRun takes the run at key over if it runs and its owner is gone.
func (s *State) claimRun(ctx context.Context, key string) (state.PanelRun, bool) {
	c := s.c
	e, err := c.panels.Get(ctx, key)
	if err != nil {
		return state.PanelRun{}, false
	}
	var v panelValue
	if json.Unmarshal(e.Value(), &v) != nil || !v.Running || c.runsHere(v.ID) {
		return state.PanelRun{}, false
	}
	if v.Owner != c.cfg.Instance {
		if alive, err := c.isMember(ctx, v.Owner); err != nil || alive {
			return state.PanelRun{}, false
		}
	}
	prev := v.Owner
	v.Owner = c.cfg.Instance
	b, err := json.Marshal(v)
	if err != nil {
		return state.PanelRun{}, false
	}
	if _, err := c.panels.Update(ctx, key, b, e.Revision()); err != nil {
		return state.PanelRun{}, false // another instance was quicker
	}
	c.ownRun(v.ID, true)
	c.log.Info("panel run of a gone instance taken over", zap.String("panel_run", v.ID), zap.String("owner", prev))
	return v.PanelRun, true
}

// ownRun records that this process runs panel run id (or no longer).
func (c *Cluster) ownRun(id string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.ownRuns[id] = true
	} else {
		delete(c.ownRuns, id)
	}
}

func (c *Cluster) runsHere(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownRuns[id]
}
