package host

// Spares for panel turns: a member's turns start no CLI of their own
// while one started ahead of them is ready.

import (
	"brainbot/bot/panel"
	"brainbot/bot/panel/engine"
)

// The processes each member of a panel keeps started ahead of its turns:
// two of a plain turn (turns 1 and 3 each take one, the second while the
// first's replacement starts) and one of turn 2 (its schema is another
// shape).
const (
	plainTurnSpares = 2
	commentSpares   = 1
)

// KeepSpares has the pipeline keep member bot's panel turns' spares, as
// long as it sits on a valid panel with a brain; else they end. The
// manager calls it when the bot starts or its brain changes, and Start
// for each member of the panel it starts (a panel file edited since).
func (h *Host) KeepSpares(member string) {
	b := h.cfg.Brain(member)
	all, _ := h.folder.Panels() // problems are reported at start and on use
	if _, _, on := panel.For(all, member, ""); b == nil || !on {
		h.DropSpares(member)
		return
	}
	q := Question{Bot: member, Brain: b}
	h.cfg.Pipeline.KeepQuestionSpares(spareSet(member, 1), q, plainTurnSpares)
	q.Schema = engine.CommentSchema
	h.cfg.Pipeline.KeepQuestionSpares(spareSet(member, 2), q, commentSpares)
}

// DropSpares ends member bot's panel turns' spares: the bot stopped.
func (h *Host) DropSpares(member string) {
	for turn := range 2 {
		h.cfg.Pipeline.KeepQuestionSpares(spareSet(member, turn+1), Question{Bot: member}, 0)
	}
}

// spareSet names the spares of member's turn: "panel/<member>" for turns
// 1 and 3, "panel/<member>/2" for turn 2.
func spareSet(member string, turn int) string {
	if turn == 2 {
		return "panel/" + member + "/2"
	}
	return "panel/" + member
}
