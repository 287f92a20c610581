package host

// A panel member's turn spoken in its brain's voice: while the model
// writes it, as a conversation's voice answer is (issue 37), or once it
// is written when speech does not start early.

import (
	"cmp"
	"context"

	"brainbot/bot/brain"
	"brainbot/bot/panel/engine"
	"brainbot/claude"
	"brainbot/toolspec"
)

// SpeakEarly starts speaking a text while it is written, in parts cut at
// sentence ends (package mcp's Speaker.Begin, as for the Claude driver's
// Config.Speak).
type SpeakEarly func(ctx context.Context, settings toolspec.SpeechSettings) claude.Utterance

// Voice speaks one turn of member in run (engine.Members): the text the
// engine hands over while the model writes is spoken as it comes when
// the host speaks early.
func (h *Host) Voice(ctx context.Context, run *engine.Run, member string) engine.Voice {
	v := &voice{h: h, run: run, member: member, b: h.cfg.Brain(member)}
	if v.b != nil && h.cfg.SpeakEarly != nil {
		v.u = h.cfg.SpeakEarly(ctx, speechSettings(v.b))
	}
	return v
}

// voice is one member's turn being spoken.
type voice struct {
	h      *Host
	run    *engine.Run
	member string
	b      *brain.Brain
	// u speaks the turn as it is written; nil: Finish speaks it whole.
	u claude.Utterance
}

func (v *voice) Write(text string) {
	if v.u != nil {
		v.u.Write(text)
	}
}

// Finish returns the note of text, made of the parts spoken while it was
// written that it still holds and the rest of it, in one file however
// long. Speech made for text the engine dropped (cut by its length cap,
// or all of a turn that failed: text "") is billed with the rest.
func (v *voice) Finish(ctx context.Context, text string) ([]byte, string, float64, error) {
	if v.u == nil {
		if text == "" {
			return nil, "", 0, nil
		}
		return v.h.speak(ctx, v.run, v.member, text)
	}
	var data []byte
	var err error
	if text != "" {
		v.u.Finish(text)
		var notes [][]byte
		if notes, _, err = v.u.Audio(ctx, -1); err == nil {
			data = notes[0]
		}
	}
	v.u.Cancel() // what is still in flight (dropped text) stops; what was made counts
	var usd float64
	if chars := v.u.Spoken(); chars > 0 {
		usd = v.h.spent(ctx, v.run, v.member, v.b, chars)
	}
	ext, _ := toolspec.SpeechExt(cmp.Or(v.b.TTS.Format, toolspec.DefaultFormat))
	return data, ext, usd, err
}
