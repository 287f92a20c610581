package intake

import (
	"context"
	"errors"
	"sync/atomic"

	"brainbot/message"
)

// progress is a message's progress told to its deliveries: one, or an
// album's, all of them. The conversation's worker uses it alone.
type progress struct {
	deliveries []message.Delivery
	// done: the conversation is through with it (answered or not); read
	// by the intake beside the worker (an edit coming too late).
	done atomic.Bool
	// behind, set while its queue answers it, takes the messages waiting
	// behind it out of the queue: they go back to the log with it.
	behind func() []*message.Inbound
}

func newProgress(ds ...message.Delivery) *progress { return &progress{deliveries: ds} }

// join adds the deliveries of a later message of an album.
func (p *progress) join(later message.Progress) {
	if l, ok := later.(*progress); ok {
		p.deliveries = append(p.deliveries, l.deliveries...)
		l.deliveries = nil
	}
}

// Attempts is the most any of the deliveries saw.
func (p *progress) Attempts() int {
	n := 0
	for _, d := range p.deliveries {
		n = max(n, d.Attempts())
	}
	return n
}

// Charged: an earlier attempt counted the message (any of its deliveries).
func (p *progress) Charged() bool {
	for _, d := range p.deliveries {
		if d.Charged() {
			return true
		}
	}
	return false
}

func (p *progress) MarkCharged(ctx context.Context, mode string) error {
	var errs []error
	for _, d := range p.deliveries {
		errs = append(errs, d.MarkCharged(ctx, mode))
	}
	return errors.Join(errs...)
}

func (p *progress) MarkAttempt(ctx context.Context, mode string) error {
	var errs []error
	for _, d := range p.deliveries {
		errs = append(errs, d.MarkAttempt(ctx, mode))
	}
	return errors.Join(errs...)
}

// Answered finishes every delivery as answered, at once.
func (p *progress) Answered() { p.Finish(false) }

// Finish gives every delivery not finished yet back to its log: done, or
// with keep handed back for a later attempt. A message handed back from
// its queue takes the ones waiting behind it along, after it: answered
// before it, they would be answered in a session without its turn (as
// if it had never been sent), and it would be answered after them. The
// log hands them out again in the order they went back.
func (p *progress) Finish(keep bool) {
	p.done.Store(true)
	var behind []*message.Inbound
	if keep && p.behind != nil {
		behind = p.behind() // out of the queue before the log can hand this one back into it
	}
	p.behind = nil
	for _, d := range p.deliveries {
		if keep {
			d.Abandon()
		} else {
			d.Done(true)
		}
	}
	p.deliveries = nil
	for _, m := range behind {
		m.Progress.Finish(true)
	}
}
