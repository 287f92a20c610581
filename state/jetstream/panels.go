package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/state"
)

// Panels: a run is started once per /panel message and one at a time per
// chat, whichever instance's member bot saw the message first (created
// keys decide). The chat's marker lives in a bucket with a TTL, refreshed
// with every step, so a run whose instance died frees its chat.
//
// A panel run belongs to the instance running it (panelValue.Owner, set
// when it starts and with every step it saves). A run whose instance is
// gone from the membership (killed, or stopped past its grace) is taken
// over by the first live instance that lists it, by a revision-checked
// update of its owner, and resumed there at the turn it saved last.

// panelRuns keeps the panel runs in brainbot_panels, and which of them
// this process runs.
type panelRuns struct {
	conn    *conn
	kv      jsapi.KeyValue
	members *membership

	mu      sync.Mutex
	ownRuns map[string]bool
}

type panelValue struct {
	state.PanelRun
	Running bool `json:"running"`
	// Owner is the instance running it.
	Owner string `json:"owner,omitempty"`
}

func panelStartKey(chat int64, message int) string { return fmt.Sprintf("start.%d.%d", chat, message) }
func panelChatKey(chat int64) string               { return fmt.Sprintf("chat.%d", chat) }
func panelRunKey(id string) string                 { return "run." + keyPart(id) }

// StartPanel records a new running panel run, unless one exists for the
// same message (state.ErrPanelStarted) or one still runs in the chat
// (state.ErrPanelBusy).
func (p *panelRuns) StartPanel(ctx context.Context, r state.PanelRun) error {
	if _, err := p.kv.Create(ctx, panelStartKey(r.Chat, r.MessageID), []byte(r.ID)); err != nil {
		if errors.Is(err, jsapi.ErrKeyExists) {
			return state.ErrPanelStarted
		}
		return fmt.Errorf("start panel: %w", err)
	}
	if _, err := p.kv.Create(ctx, panelChatKey(r.Chat), []byte(r.ID)); err != nil {
		// Refused, the message claims nothing: asked again once the chat
		// is free, it starts.
		_ = p.kv.Delete(ctx, panelStartKey(r.Chat, r.MessageID))
		if errors.Is(err, jsapi.ErrKeyExists) {
			return state.ErrPanelBusy
		}
		return fmt.Errorf("start panel: %w", err)
	}
	p.own(r.ID, true)
	return p.put(ctx, panelValue{PanelRun: r, Running: true, Owner: p.conn.cfg.Instance})
}

func (p *panelRuns) put(ctx context.Context, v panelValue) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := p.kv.Put(ctx, panelRunKey(v.ID), b); err != nil {
		return fmt.Errorf("save panel: %w", err)
	}
	return nil
}

// SavePanel stores a run's state; finished marks it no longer running and
// frees its chat.
func (p *panelRuns) SavePanel(ctx context.Context, id string, run []byte, finished bool, now time.Time) error {
	e, err := p.kv.Get(ctx, panelRunKey(id))
	if err != nil {
		return fmt.Errorf("store: no panel run %s: %w", id, err)
	}
	var v panelValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return err
	}
	v.Run, v.Running, v.Owner = run, !finished, p.conn.cfg.Instance
	if err := p.put(ctx, v); err != nil {
		return err
	}
	if finished {
		p.own(id, false)
		_ = p.kv.Delete(ctx, panelChatKey(v.Chat)) // expires anyway
		return nil
	}
	_, err = p.kv.Put(ctx, panelChatKey(v.Chat), []byte(id)) // refresh
	return err
}

// RunningPanels claims, for this instance, the running panel runs whose
// instance is gone (or is this one's name, from an earlier process), and
// returns them to be resumed (panel/host.Resumable). Right after an
// outage an instance not back yet is not gone (membership.isMember).
func (p *panelRuns) RunningPanels(ctx context.Context) ([]state.PanelRun, error) {
	keys, err := p.kv.Keys(ctx)
	switch {
	case errors.Is(err, jsapi.ErrNoKeysFound):
		return nil, nil
	case unavailable(err):
		p.conn.health.failed("list panel runs", err) // the next look, when NATS is back
		return nil, nil
	case err != nil:
		return nil, err
	}
	var out []state.PanelRun
	for _, k := range keys {
		if !strings.HasPrefix(k, "run.") {
			continue
		}
		if r, ok := p.claimRun(ctx, k); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// claimRun takes the run at key over if it runs and its owner is gone.
func (p *panelRuns) claimRun(ctx context.Context, key string) (state.PanelRun, bool) {
	e, err := p.kv.Get(ctx, key)
	if err != nil {
		return state.PanelRun{}, false
	}
	var v panelValue
	if json.Unmarshal(e.Value(), &v) != nil || !v.Running || p.runsHere(v.ID) {
		return state.PanelRun{}, false
	}
	if v.Owner != p.conn.cfg.Instance {
		if alive, err := p.members.isMember(ctx, v.Owner); err != nil || alive {
			return state.PanelRun{}, false
		}
	}
	prev := v.Owner
	v.Owner = p.conn.cfg.Instance
	b, err := json.Marshal(v)
	if err != nil {
		return state.PanelRun{}, false
	}
	if _, err := p.kv.Update(ctx, key, b, e.Revision()); err != nil {
		return state.PanelRun{}, false // another instance was quicker
	}
	p.own(v.ID, true)
	p.conn.log.Info("panel run of a gone instance taken over", zap.String("panel_run", v.ID), zap.String("owner", prev))
	return v.PanelRun, true
}

// own records that this process runs panel run id (or no longer).
func (p *panelRuns) own(id string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.ownRuns[id] = true
	} else {
		delete(p.ownRuns, id)
	}
}

func (p *panelRuns) runsHere(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ownRuns[id]
}
