package jetstream

import (
	"maps"
	"slices"
	"sync"
	"time"

	jsapi "github.com/nats-io/nats.go/jetstream"
)

// claims keeps the updates handed to this instance and not yet done, by
// stream sequence, each as its newest delivery: kept alive while they are
// worked on, acknowledged through the newest, handed back on Release.
type claims struct {
	ackWait time.Duration

	mu   sync.Mutex
	held map[uint64]jsapi.Msg
	// released is closed once Release handed the held updates back.
	released  chan struct{}
	closeOnce sync.Once
}

func newClaims(ackWait time.Duration) *claims {
	return &claims{ackWait: ackWait, held: map[uint64]jsapi.Msg{}, released: make(chan struct{})}
}

// claim records msg as the newest delivery of the update at seq. held:
// the update was held already (redelivered while this instance holds
// it), and msg replaced the older delivery. An update not held yet is
// claimed only if fresh is true.
func (c *claims) claim(seq uint64, msg jsapi.Msg, fresh bool) (held bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, held = c.held[seq]
	if held || fresh {
		c.held[seq] = msg
	}
	return held
}

// newest is the newest delivery of the update at seq (msg if it is no
// longer held).
func (c *claims) newest(seq uint64, msg jsapi.Msg) jsapi.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	if newest, ok := c.held[seq]; ok {
		return newest
	}
	return msg
}

// take forgets the update at seq and returns its newest delivery, if it
// was held.
func (c *claims) take(seq uint64) (jsapi.Msg, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg, ok := c.held[seq]
	delete(c.held, seq)
	return msg, ok
}

// handBack hands every update held back to the server, which redelivers
// them at once, and ends the keep-alive.
func (c *claims) handBack() {
	c.mu.Lock()
	held := c.held
	c.held = map[uint64]jsapi.Msg{}
	c.mu.Unlock()
	for _, m := range held {
		_ = m.Nak()
	}
	c.closeOnce.Do(func() { close(c.released) })
}

// keepAlive tells the server, five times per ack wait, that the updates
// held are being worked on, until handBack.
func (c *claims) keepAlive() {
	tick := time.NewTicker(c.ackWait / 5)
	defer tick.Stop()
	for {
		select {
		case <-c.released:
			return
		case <-tick.C:
		}
		c.mu.Lock()
		msgs := slices.Collect(maps.Values(c.held))
		c.mu.Unlock()
		for _, m := range msgs {
			_ = m.InProgress() // a lost one is redelivered: answered-dedupe
		}
	}
}
