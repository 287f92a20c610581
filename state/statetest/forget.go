package statetest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"brainbot/message"
	"brainbot/state"
)

// The conversations an admin lists, and a user's forgotten.

// Ann (user 7) talks to alice in private, as a guest in a group, and to
// bob; Bo (user 8) to alice; the group talks to alice.
var (
	annAlice = message.Key{Bot: "alice", Chat: 7}
	annGuest = message.GuestKey("alice", -1002003004005, 7)
	annBob   = message.Key{Bot: "bob", Chat: 7}
	boAlice  = message.Key{Bot: "alice", Chat: 8}
	group    = message.Key{Bot: "alice", Chat: -1002003004005}
)

// talk gives each conversation a session, the first used last.
func talk(t *testing.T, s *subject, keys ...message.Key) time.Time {
	t0 := base()
	for i, k := range keys {
		must(t, s.UseSession(ctx(t), k, "s-"+k.String(), t0.Add(-time.Duration(i)*time.Minute)))
	}
	return t0
}

var forgetTests = []behaviour{
	{"ListedByBotAndUser", func(t *testing.T, s *subject) {
		talk(t, s, annAlice, annGuest, annBob, boAlice, group)
		wantConversations(t, s, state.ConversationFilter{}, annAlice, annGuest, annBob, boAlice, group)
		wantConversations(t, s, state.ConversationFilter{Bot: "alice"}, annAlice, annGuest, boAlice, group)
		wantConversations(t, s, state.ConversationFilter{User: 7}, annAlice, annGuest, annBob)
		wantConversations(t, s, state.ConversationFilter{Bot: "alice", User: 7}, annAlice, annGuest)
		wantConversations(t, s, state.ConversationFilter{Bot: "carol"})
		_, err := s.ResetSession(ctx(t), annBob, base())
		must(t, err)
		wantConversations(t, s, state.ConversationFilter{User: 7}, annAlice, annGuest)
	}},
	{"ForgetDeletesTheUsersAndKeepsTheCosts", func(t *testing.T, s *subject) {
		now := talk(t, s, annAlice, annGuest, annBob, boAlice, group)
		// Ann's private conversation had a session before (a /reset).
		must(t, s.UseSession(ctx(t), annAlice, "s-before", now.Add(-time.Hour)))
		must(t, s.UseSession(ctx(t), annAlice, "s-"+annAlice.String(), now))
		writeTranscript(t, s, "alice", "s-"+annAlice.String(), transcript)
		must(t, s.Save(ctx(t), "alice", "s-"+annAlice.String()))
		for _, bot := range []string{"alice", "bob"} {
			must(t, s.SetVoice(ctx(t), bot, 7, true))
			must1(t, s, bot, 7, 0, now)
			record(t, s, state.Usage{At: now, Bot: bot, Chat: 7, User: 7, Mode: "text", Outcome: "ok", ClaudeUSD: 0.5})
		}
		record(t, s, state.Usage{At: now, Bot: "alice", Chat: 8, User: 8, Mode: "text", Outcome: "ok", ClaudeUSD: 0.25})
		theirs, others := question(7, "yes"), question(7, "no")
		theirs.Conversation, others.Conversation = annAlice, group
		must(t, s.SaveButtons(ctx(t), theirs))
		must(t, s.SaveButtons(ctx(t), others))
		before, err := s.UsageReport(ctx(t), state.UsageFilter{Since: now.Add(-time.Hour)})
		must(t, err)

		forgot, err := s.ForgetUser(ctx(t), "alice", 7)
		must(t, err)
		if !sameKeys(forgot.Conversations, annAlice, annGuest) || !slices.Contains(forgot.Sessions, "s-before") ||
			!slices.Contains(forgot.Sessions, "s-"+annAlice.String()) || !slices.Contains(forgot.Sessions, "s-"+annGuest.String()) {
			t.Errorf("ForgetUser = %+v, want Ann's two conversations with alice and their three sessions", forgot)
		}
		s.restarted()
		wantConversations(t, s, state.ConversationFilter{User: 7}, annBob)
		wantConversations(t, s, state.ConversationFilter{Bot: "alice"}, boAlice, group)
		wantVoice(t, s, "alice", 7, false, false)
		wantVoice(t, s, "bob", 7, true, true)
		wantCount(t, s, "alice", 7, now, 0)
		wantCount(t, s, "bob", 7, now, 1)
		wantSpent(t, s, "alice", 7, now, 0)
		wantSpent(t, s, "alice", 0, now, 0.75) // the bot's own spending still adds up
		if _, found, err := s.LookupButtons(ctx(t), theirs.ID); err != nil || found {
			t.Errorf("Ann's buttons after the forget: found %v, %v", found, err)
		}
		// The group's stay, no longer naming Ann (see
		// ForgetLeavesNoButtonsNamingTheUser).
		others.User, others.UsedBy = group.Chat, state.ButtonsClosed
		wantButtons(t, s, others)
		after, err := s.UsageReport(ctx(t), state.UsageFilter{Since: now.Add(-time.Hour)})
		must(t, err)
		if !slices.Equal(before, after) {
			t.Errorf("usage report after the forget =\n%+v\nwant as before\n%+v", after, before)
		}
		byUser, err := s.UsageReport(ctx(t), state.UsageFilter{Since: now.Add(-time.Hour), Bot: "alice", ByUser: true})
		must(t, err)
		for _, l := range byUser {
			if l.User == 7 {
				t.Errorf("usage still names Ann: %+v", l)
			}
		}
		// What the backend stored of the transcript is gone: the caller
		// deleted the CLI's own copy, and nothing brings it back.
		must(t, os.Remove(s.sessionFile("alice", "s-"+annAlice.String())))
		must(t, s.Restore(ctx(t), "alice", "s-"+annAlice.String(), func() {}))
		wantTranscript(t, s, "alice", "s-"+annAlice.String(), "")
	}},
	{"ForgetLeavesNoCopyInTheDataFolder", func(t *testing.T, s *subject) {
		// Ann's words: a phrase she sent, which an answer she can have
		// read aloud repeats, and her name, in the updates as Telegram
		// sent them; both answered (their entries cleared) before the
		// forget. Bo's message stays.
		const secret, name = "Zanzibar quokka sonata 4471", "Annabel Quist"
		talk(t, s, annAlice, boAlice)
		c := startConsume(t, s)
		appendAll(t, s, said(annAlice, 1, name, "Remember "+secret), said(boAlice, 2, "Bo", "hello"),
			said(annAlice, 3, name, "/forget"))
		for _, d := range c.until(t, 1, 2, 3) {
			d.Done(true)
		}
		read := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsRead, Conversation: annAlice,
			Text: "You said: Remember " + secret, Created: base()}
		must(t, s.SaveButtons(ctx(t), read))

		_, err := s.ForgetUser(ctx(t), "alice", 7)
		must(t, err)
		wantNoCopy(t, s, "once ForgetUser returned", secret, name)
		c.stop()
		s.restarted()
		wantNoCopy(t, s, "after a restart", secret, name)
		wantConversations(t, s, state.ConversationFilter{}, boAlice)
	}},
	{"ForgetLeavesNoButtonsNamingTheUser", func(t *testing.T, s *subject) {
		// In a group, Ann's ⏹ (her answer still streamed), a question
		// the bot asked her, Bo's ⏹, and bob's ⏹ for her.
		stop := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsStop, Conversation: group, User: 7, Created: base()}
		asked := question(7, "yes", "no")
		asked.Conversation = group
		bos, bobs := stop, stop
		bos.ID, bos.User = state.NewButtonsID(), 8
		bobs.ID, bobs.Conversation.Bot = state.NewButtonsID(), "bob"
		for _, b := range []state.Buttons{stop, asked, bos, bobs} {
			must(t, s.SaveButtons(ctx(t), b))
		}
		_, err := s.ForgetUser(ctx(t), "alice", 7)
		must(t, err)
		s.restarted()
		// Ann's ⏹ is the group's admins' now (as an anonymous admin's
		// is): they may still stop the answer; the question asked her
		// is closed, no one else's to answer.
		stop.User, asked.User, asked.UsedBy = group.Chat, group.Chat, state.ButtonsClosed
		for _, b := range []state.Buttons{stop, asked, bos, bobs} {
			wantButtons(t, s, b)
		}
		wantUse(t, s, stop.ID, 400, true)
		if closed, err := s.CloseQuestions(ctx(t), group, 0); err != nil || len(closed) != 0 {
			t.Errorf("CloseQuestions after the forget = %+v, %v; want none open", closed, err)
		}
	}},
	{"ForgetOfEveryBot", func(t *testing.T, s *subject) {
		talk(t, s, annAlice, annBob, boAlice)
		forgot, err := s.ForgetUser(ctx(t), "", 7)
		must(t, err)
		if !sameKeys(forgot.Conversations, annAlice, annBob) {
			t.Errorf("ForgetUser of every bot: %v, want Ann's with alice and bob", forgot.Conversations)
		}
		wantConversations(t, s, state.ConversationFilter{}, boAlice)
	}},
	{"ForgetOfNoUserIsRefused", func(t *testing.T, s *subject) {
		talk(t, s, group)
		if _, err := s.ForgetUser(ctx(t), "alice", 0); err == nil {
			t.Error("ForgetUser of user 0 = nil, want an error: a group's conversation is no one user's")
		}
		wantConversations(t, s, state.ConversationFilter{}, group)
	}},
}

// wantConversations checks the conversations f lists, in order.
func wantConversations(t *testing.T, s *subject, f state.ConversationFilter, want ...message.Key) {
	t.Helper()
	got, err := s.Conversations(ctx(t), f)
	must(t, err)
	var keys []message.Key
	for _, c := range got {
		keys = append(keys, c.Key)
		if c.Session.ID != "s-"+c.Key.String() {
			t.Errorf("conversation %v has session %q", c.Key, c.Session.ID)
		}
	}
	if !slices.Equal(keys, want) {
		t.Errorf("Conversations(%+v) = %v, want %v", f, keys, want)
	}
}

func sameKeys(got []message.Key, want ...message.Key) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(k message.Key) bool { return !slices.Contains(got, k) })
}

// wantNoCopy checks that no file under the data folder holds any of
// words, as grep -a would find them.
func wantNoCopy(t *testing.T, s *subject, when string, words ...string) {
	t.Helper()
	err := filepath.WalkDir(s.data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) { // gone while we looked
			return nil
		}
		for _, w := range words {
			if bytes.Contains(data, []byte(w)) {
				t.Errorf("%s, %s holds %q", when, path, w)
			}
		}
		return err
	})
	must(t, err)
}
