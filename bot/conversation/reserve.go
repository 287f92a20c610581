package conversation

// The answers under way, counted against the spending caps before their
// cost is known.
//
// A cap is checked against what was spent and recorded; an answer's cost
// is recorded only once it is over. Without more, every message that
// arrives while the first answers are written passes the check: one user
// asking in seven chats at once got seven answers, 58 times the cap. So
// each answer under way holds what it may cost (its reservation) until
// its cost is recorded, and a new answer starts only while what was
// spent and what is held leave room under every cap:
//
//   - What an answer may cost is not known before it ends. It is
//     estimated as the dearest answer of its kind (text, voice, picture)
//     the bot gave since this instance started; while none is known, as
//     all the room left, so the first answer runs alone until its price
//     is known. What its speech or picture may cost at most (both known
//     in advance) is held in any case.
//   - A message with no room left while others are under way waits for
//     them: they may end cheaper than held, and then it is answered. It
//     gets messages.spending_cap only once what was spent (not held)
//     reaches the cap. A 🔊 tap does not wait (Telegram wants its answer
//     at once): it is told the cap is reached.
//   - Speech stops where a cap is reached: a voice answer speaks no more
//     than the room it was given buys (besides tts.max_chars).
//
// So a user, or the bot, passes a cap by at most one answer's model cost,
// unless an answer costs more than any before it. The holds are this
// instance's: in a cluster each instance counts its own.

import (
	"context"
	"errors"
	"math"
	"sync"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/claude"
	"brainbot/metrics"
	"brainbot/pricing"
	"brainbot/state"
)

// minSpokenChars is the least room for speech worth a voice answer,
// about seven seconds: with less, the answer is written instead.
const minSpokenChars = 100

// purse holds what the answers under way may cost. It is safe for
// concurrent use.
type purse struct {
	metrics *metrics.Metrics

	mu    sync.Mutex
	holds map[*hold]struct{}
	// ended is closed, and replaced, when a hold ends: the answers
	// waiting for room look again.
	ended chan struct{}
	// dearest is the most an answer of a bot, by kind, cost here.
	dearest map[dearKey]float64
}

type dearKey struct {
	bot  string
	mode claude.Mode
}

// hold is one answer under way: usd is held against its bot's caps, and
// its user's.
type hold struct {
	bot  string
	user int64
	mode claude.Mode
	usd  float64
}

func newPurse(m *metrics.Metrics) *purse {
	return &purse{metrics: m, holds: map[*hold]struct{}{}, ended: make(chan struct{}), dearest: map[dearKey]float64{}}
}

// spending is what was spent today, by a bot and by one of its users,
// with the caps it is held to (0: none).
type spending struct {
	botCap, userCap     float64
	botSpent, userSpent float64
}

// room is what the caps leave for one more answer of bot's user beside
// the answers under way (the caller holds pu.mu); +Inf without a cap.
func (pu *purse) room(s spending, bot string, user int64) float64 {
	room := math.Inf(1)
	var botHeld, userHeld float64
	for h := range pu.holds {
		if h.bot != bot {
			continue
		}
		botHeld += h.usd
		if h.user == user {
			userHeld += h.usd
		}
	}
	if s.botCap > 0 {
		room = min(room, s.botCap-s.botSpent-botHeld)
	}
	if s.userCap > 0 {
		room = min(room, s.userCap-s.userSpent-userHeld)
	}
	return room
}

// estimate is what an answer of kind mode may cost, given room left: the
// dearest such answer of bot so far, or all the room while none is known
// (the caller holds pu.mu).
func (pu *purse) estimate(bot string, mode claude.Mode, room float64) float64 {
	if usd, ok := pu.dearest[dearKey{bot, mode}]; ok {
		return usd
	}
	return room
}

// take holds usd for an answer (the caller holds pu.mu).
func (pu *purse) take(h *hold) {
	pu.holds[h] = struct{}{}
	pu.metrics.Reserved.WithLabelValues(h.bot).Add(h.usd)
}

// release ends h, an answer that cost usd (recorded already, so the caps
// count it as spent), and wakes the answers waiting for room.
func (pu *purse) release(h *hold, usd float64) {
	if h == nil {
		return
	}
	pu.mu.Lock()
	defer pu.mu.Unlock()
	delete(pu.holds, h)
	pu.metrics.Reserved.WithLabelValues(h.bot).Sub(h.usd)
	if k := (dearKey{h.bot, h.mode}); usd > pu.dearest[k] {
		pu.dearest[k] = usd
	}
	close(pu.ended)
	pu.ended = make(chan struct{})
}

// allowance is what an answer was given: the hold to release when it
// ends (nil: the brain sets no cap) and how many characters it may speak
// (math.MaxInt: no bound).
type allowance struct {
	hold  *hold
	chars int
}

// speechBound is chars as SpeechSettings.MaxChars says it (0: no bound).
func (a allowance) speechBound() int {
	if a.chars == math.MaxInt {
		return 0
	}
	return a.chars
}

// reserve waits until bot's caps, and user's, leave room for one more
// answer of kind mode (brain b) beside those under way, and holds what it
// may cost. over: a cap is spent (what was recorded), or, when wait is
// false, there is no room now. ctx ending, or stopping closing, ends the
// wait with ctx's error or errStopping.
func (p *Pipeline) reserve(ctx context.Context, b *brain.Brain, bot string, user int64, mode claude.Mode, wait bool,
	log *zap.Logger) (a allowance, over bool, err error) {
	waited := false
	for {
		p.purse.mu.Lock()
		ended := p.purse.ended
		p.purse.mu.Unlock()
		s, err := p.spending(ctx, b, bot, user)
		if err != nil {
			return a, false, err
		}
		if s.botCap > 0 && s.botSpent >= s.botCap || s.userCap > 0 && s.userSpent >= s.userCap {
			p.warnCapReached(b, bot, s, log)
			return a, true, nil
		}
		p.purse.mu.Lock()
		if p.purse.ended != ended { // an answer ended since: its cost is spent now
			p.purse.mu.Unlock()
			continue
		}
		room := p.purse.room(s, bot, user)
		if room > 0 {
			a = p.hold(b, bot, user, mode, room)
			p.purse.mu.Unlock()
			return a, false, nil
		}
		p.purse.mu.Unlock()
		if !wait {
			return a, true, nil
		}
		if !waited {
			waited = true
			log.Info("spending cap: waiting for the answers under way to end", zap.Float64("room_usd", room))
		}
		select {
		case <-ended:
		case <-ctx.Done():
			return a, false, ctx.Err()
		case <-p.cfg.Stopping:
			return a, false, errStopping
		}
	}
}

// hold takes the allowance of an answer of kind mode given room (the
// caller holds p.purse.mu): its speech bounded by tts.max_chars and by
// what the room buys; held, the most its speech or picture may cost, at
// least the estimate of the whole.
func (p *Pipeline) hold(b *brain.Brain, bot string, user int64, mode claude.Mode, room float64) allowance {
	a := allowance{chars: b.TTS.MaxChars}
	if a.chars == 0 {
		a.chars = math.MaxInt
	}
	perChar, _ := pricing.Speech(b.TTS.Model, 1)
	if perChar > 0 && !math.IsInf(room, 1) {
		a.chars = min(a.chars, int(room/perChar))
	}
	if math.IsInf(room, 1) {
		return a // no cap: nothing to hold
	}
	var bound float64
	switch mode {
	case claude.Speech:
		bound = perChar * float64(a.chars)
	case claude.Image:
		bound, _ = pricing.Image(b.Image.Model, b.Image.Size, b.Image.Quality)
	}
	a.hold = &hold{bot: bot, user: user, mode: mode, usd: max(bound, p.purse.estimate(bot, mode, room))}
	p.purse.take(a.hold)
	return a
}

// reserveAnswer holds what the request's answer of kind mode may cost,
// waiting for room under the caps (reserve), and returns the kind it is
// answered in: text when the room buys too little speech to be worth a
// voice answer. An error means the request is answered: the cap's reply,
// a failure, or shutdown.
func (p *Pipeline) reserveAnswer(r *request, mode claude.Mode) (claude.Mode, error) {
	a, over, err := p.reserve(r.ctx, r.brain, r.in.Key.Bot, r.in.Sender, mode, true, r.log)
	switch {
	case errors.Is(err, errStopping) || err != nil && r.ctx.Err() != nil:
		r.interrupted()
		return mode, err
	case err != nil:
		r.fail("budget", err)
		return mode, err
	case over:
		now := p.cfg.Now()
		r.notice(outcomeSpendingCap, r.brain.Messages.SpendingCapText(state.NextReset(now).Sub(now)))
		return mode, errCapReached
	}
	r.allow = a
	if mode == claude.Speech && a.chars < minSpokenChars {
		r.log.Info("spending cap near: the answer is written, not spoken", zap.Int("speech_room_chars", a.chars))
		if a.hold != nil {
			a.hold.mode = claude.Text // its cost tells what a text answer costs
		}
		return claude.Text, nil
	}
	return mode, nil
}

// errCapReached: a spending cap is reached, the user told so.
var errCapReached = errors.New("spending cap reached")
