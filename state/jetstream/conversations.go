package jetstream

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	jsapi "github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"brainbot/message"
	"brainbot/state"
)

// forgottenSubject carries, over core NATS, each forget to the other
// instances (WatchForgets). An instance away at that moment keeps no warm
// CLI of it by the time it is back; its local copies are not restored
// again (the records are gone).
const forgottenSubject = "brainbot.forgotten"

// userData lists the conversations in the state bucket and forgets a
// user's everywhere the cluster keeps it (state.Conversations).
type userData struct {
	conn                                     *conn
	records, daily, button, notes, schedules jsapi.KeyValue
	objects                                  jsapi.ObjectStore
	updates                                  jsapi.Stream
}

var _ state.Conversations = (*userData)(nil)

// pastKey keeps the ids of a conversation's sessions before its current
// one (replaced or reset), so a forget finds their transcripts.
func pastKey(c message.Key) string {
	return fmt.Sprintf("past.%s.%d.%d", keyPart(c.Bot), c.Chat, c.Thread)
}

// Conversations lists the conversations f selects, the most recently used
// first.
func (u *userData) Conversations(ctx context.Context, f state.ConversationFilter) ([]state.Conversation, error) {
	var out []state.Conversation
	err := scan(ctx, u.records, "session.>", func(_ string, value []byte) {
		var v sessionValue
		if json.Unmarshal(value, &v) != nil || v.Conversation == nil || !selects(f, *v.Conversation) {
			return
		}
		out = append(out, state.Conversation{Key: *v.Conversation,
			Session: state.Session{ID: v.ID, Created: v.Created, LastUsed: v.LastUsed}})
	})
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	slices.SortFunc(out, func(a, b state.Conversation) int {
		return cmp.Or(b.Session.LastUsed.Compare(a.Session.LastUsed), cmp.Compare(a.Key.String(), b.Key.String()))
	})
	return out, nil
}

func selects(f state.ConversationFilter, k message.Key) bool {
	return (f.Bot == "" || k.Bot == f.Bot) && (f.User == 0 || k.User() == f.User)
}

// ForgetUser deletes what the cluster keeps of user's with bot ("": every
// bot), then tells the other instances.
func (u *userData) ForgetUser(ctx context.Context, bot string, user int64) (state.Forgotten, error) {
	if user <= 0 {
		return state.Forgotten{}, fmt.Errorf("forget user %d: not a user's id", user)
	}
	forgot := state.Forgotten{Bot: bot, User: user}
	convs, err := u.Conversations(ctx, state.ConversationFilter{Bot: bot, User: user})
	if err != nil {
		return state.Forgotten{}, err
	}
	for _, c := range convs {
		past, err := u.forgetConversation(ctx, c)
		if err != nil {
			return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
		}
		forgot.Conversations = append(forgot.Conversations, c.Key)
		forgot.Sessions = append(forgot.Sessions, past...)
	}
	if err := u.forgetButtons(ctx, bot, user, forgot.Conversations); err != nil {
		return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
	}
	if err := u.forgetChoices(ctx, bot, user); err != nil {
		return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
	}
	if forgot.Notes, err = u.forgetNotes(ctx, bot, user); err != nil {
		return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
	}
	if forgot.Reminders, err = u.forgetSchedules(ctx, bot, user); err != nil {
		return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
	}
	if err := u.conn.patiently(ctx, "forget scheduled messages", func(ctx context.Context) error {
		return u.forgetScheduled(ctx, bot, user)
	}); err != nil {
		return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
	}
	if err := u.anonymiseUsage(ctx, bot, user); err != nil {
		return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
	}
	if data, err := json.Marshal(forgottenNotice{Forgotten: forgot, From: u.conn.cfg.Instance}); err == nil {
		if err := u.conn.nc.Publish(forgottenSubject, data); err != nil {
			u.conn.log.Warn("could not tell the other instances of a forget; their warm CLIs end when idle", zap.Error(err))
		}
	}
	return forgot, nil
}

// forgetConversation deletes c's sessions (current and past), their
// stored transcripts and its updates not answered yet; it returns the
// sessions' ids.
func (u *userData) forgetConversation(ctx context.Context, c state.Conversation) ([]string, error) {
	sessions := []string{c.Session.ID}
	if val, found, err := u.conn.get(ctx, u.records, pastKey(c.Key)); err != nil {
		return nil, err
	} else if found {
		var past []string
		_ = json.Unmarshal(val, &past) // unreadable: only the current one is known
		sessions = append(past, sessions...)
	}
	for _, id := range sessions {
		if err := u.dropTranscript(ctx, c.Key.Bot, id); err != nil {
			return nil, err
		}
	}
	for _, key := range []string{sessionKey(c.Key), pastKey(c.Key)} {
		if err := u.conn.patiently(ctx, "forget "+key, func(ctx context.Context) error { return u.records.Purge(ctx, key) }); err != nil {
			return nil, err
		}
	}
	// The updates of the conversation no instance has answered yet.
	filter := fmt.Sprintf("%s.*.%s.%d.%d", partPrefix, keyPart(c.Key.Bot), c.Key.Chat, c.Key.Thread)
	err := u.conn.patiently(ctx, "forget updates", func(ctx context.Context) error {
		return u.updates.Purge(ctx, jsapi.WithPurgeSubject(filter))
	})
	return sessions, err
}

// dropTranscript deletes the stored transcript of session and its record.
func (u *userData) dropTranscript(ctx context.Context, bot, session string) error {
	key := transcriptKey(bot, session)
	val, found, err := u.conn.get(ctx, u.records, key)
	if err != nil || !found {
		return err
	}
	var rec transcriptRecord
	if json.Unmarshal(val, &rec) == nil && rec.Object != "" {
		if err := u.objects.Delete(ctx, rec.Object); err != nil && !errors.Is(err, jsapi.ErrObjectNotFound) {
			return fmt.Errorf("delete transcript %s: %w", rec.Object, err)
		}
	}
	return u.conn.patiently(ctx, "forget "+key, func(ctx context.Context) error { return u.records.Purge(ctx, key) })
}

// forgetButtons deletes the buttons under user's conversations with bot
// (convs, and those without a session now), and hands the buttons in
// other conversations (a group's) that name user to the group's admins,
// as an anonymous admin's are: an answer they asked for may still be
// stopped, by an admin; a question asked of them is closed, no one
// else's to answer.
func (u *userData) forgetButtons(ctx context.Context, bot string, user int64, convs []message.Key) error {
	var drop, handOver []string
	err := scan(ctx, u.button, "b.>", func(key string, value []byte) {
		var b state.Buttons
		switch {
		case json.Unmarshal(value, &b) != nil:
		case b.Conversation.IsUsers(bot, user):
			drop = append(drop, key)
		case b.User == user && (bot == "" || b.Conversation.Bot == bot):
			handOver = append(handOver, key)
		}
	})
	for _, c := range convs {
		drop = append(drop, openQuestionKey(c))
	}
	for _, key := range drop {
		if err == nil {
			err = u.button.Purge(ctx, key)
		}
	}
	for _, key := range handOver {
		if err == nil {
			err = u.conn.change(ctx, u.button, key, func(old []byte, found bool) ([]byte, bool) {
				var b state.Buttons
				if !found || json.Unmarshal(old, &b) != nil || b.User != user {
					return nil, false
				}
				b.User = b.Conversation.Chat
				if b.Kind == state.ButtonsQuestion && b.UsedBy == 0 {
					b.UsedBy = state.ButtonsClosed
				}
				v, _ := json.Marshal(b)
				return v, true
			})
		}
	}
	return err
}

// forgetChoices deletes user's /voice choices and daily counts (every
// day's kept) with bot ("": every bot).
func (u *userData) forgetChoices(ctx context.Context, bot string, user int64) error {
	of := func(key string) bool {
		parts := strings.Split(key, ".")
		owner := parts[len(parts)-1] == fmt.Sprint(user)
		return owner && (bot == "" || parts[len(parts)-2] == keyPart(bot))
	}
	var err error
	for _, from := range []struct {
		kv     jsapi.KeyValue
		filter string
	}{{u.records, "voice.>"}, {u.daily, "count.>"}, {u.daily, "spent.>"}} {
		var keys []string
		if err == nil {
			err = scan(ctx, from.kv, from.filter, func(key string, _ []byte) {
				if of(key) {
					keys = append(keys, key)
				}
			})
		}
		for _, key := range keys {
			if err == nil {
				err = from.kv.Purge(ctx, key)
			}
		}
	}
	return err
}

// anonymiseUsage replaces user's usage records with bot ("": every bot)
// by copies without their id (and their private chat's): each record
// stays, so the costs still add up.
func (u *userData) anonymiseUsage(ctx context.Context, bot string, user int64) error {
	stream, err := u.conn.js.Stream(ctx, UsageStream)
	if err != nil {
		return fmt.Errorf("usage stream: %w", err)
	}
	subject := "brainbot.usage.>"
	if bot != "" {
		subject = "brainbot.usage." + keyPart(bot)
	}
	type record struct {
		seq uint64
		u   state.Usage
	}
	var theirs []record
	err = eachUsage(ctx, stream, jsapi.OrderedConsumerConfig{FilterSubjects: []string{subject}}, func(seq uint64, u state.Usage) {
		if u.User == user {
			theirs = append(theirs, record{seq, u})
		}
	})
	if err != nil {
		return err
	}
	for _, r := range theirs {
		r.u.User = 0
		if r.u.Chat == user {
			r.u.Chat = 0
		}
		data, _ := json.Marshal(r.u)
		msg := nats.NewMsg("brainbot.usage." + keyPart(r.u.Bot))
		msg.Data = data
		msg.Header.Set(nats.MsgIdHdr, fmt.Sprintf("forgotten/%d", r.seq))
		if _, err := u.conn.js.PublishMsg(ctx, msg); err != nil {
			return fmt.Errorf("anonymise usage: %w", err)
		}
		if err := stream.DeleteMsg(ctx, r.seq); err != nil && !errors.Is(err, jsapi.ErrMsgNotFound) {
			return fmt.Errorf("anonymise usage: %w", err)
		}
	}
	return nil
}

// forgottenNotice is a forget as told to the other instances.
type forgottenNotice struct {
	state.Forgotten
	From string `json:"from"` // the instance that did it
}

// WatchForgets calls fn with every forget another instance does, until
// ctx ends.
func (u *userData) WatchForgets(ctx context.Context, fn func(state.Forgotten)) {
	sub, err := u.conn.nc.Subscribe(forgottenSubject, func(m *nats.Msg) {
		var n forgottenNotice
		if json.Unmarshal(m.Data, &n) != nil || n.From == u.conn.cfg.Instance {
			return
		}
		fn(n.Forgotten)
	})
	if err != nil {
		u.conn.log.Warn("not told of forgets elsewhere: their users' warm CLIs here end when idle", zap.Error(err))
		return
	}
	// Heard from the moment it returns: the server has the subscription.
	_ = u.conn.nc.Flush()
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
}

// scan calls fn with every current key and value of kv the filter
// selects.
func scan(ctx context.Context, kv jsapi.KeyValue, filter string, fn func(key string, value []byte)) error {
	w, err := kv.WatchFiltered(ctx, []string{filter}, jsapi.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-w.Updates():
			if e == nil {
				return nil // the current values are all read
			}
			fn(e.Key(), e.Value())
		}
	}
}
