package conversation

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"brainbot/claude"
	"brainbot/message"
)

// supersede stops the turn of a message its sender edited while it was
// answered (the intake marked it Superseded and queued the edited
// version next): nothing of that answer is sent.
func (p *Pipeline) supersede(r *request) {
	if p.claude.Interrupt(r.in.Key.String()) {
		r.log.Info("turn stopped: its message was edited")
	} else {
		r.log.Debug("message edited before its turn ran: it will not run")
	}
	r.drop("edit")
}

// superseded reports whether r's message was edited while it was
// answered; if so, it ends the request with nothing sent: a group's
// streamed message is taken back, a file res's tool wrote is removed. Its
// usage is still recorded.
func (r *request) superseded(res *claude.Result) bool {
	if !r.in.Superseded.Load() {
		return false
	}
	r.log.Info("answer of an edited message's old version dropped", zap.Bool("claude_ran", res != nil))
	if err := r.out.Withdraw(context.WithoutCancel(r.ctx)); err != nil && !errors.Is(err, message.ErrBlocked) {
		r.log.Info("could not take back the streamed answer of the old version", zap.Error(err))
	}
	r.p.dropFile(r, res)
	r.sum.outcome = "edited"
	return true
}
