package statetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"brainbot/state"
)

// What the buttons under the bots' messages mean, the panel runs, and
// which brain holds each Telegram bot.

func question(user int64, options ...string) state.Buttons {
	return state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsQuestion, Conversation: topic, User: user,
		Options: options, Text: "Which one?", Created: base()}
}

var buttonTests = []behaviour{
	{"SaveLookupPlaceKeepFile", func(t *testing.T, s *subject) {
		if _, ok, err := s.LookupButtons(ctx(t), state.NewButtonsID()); err != nil || ok {
			t.Fatalf("LookupButtons of an unknown id = ok %v, %v; want none", ok, err)
		}
		q := question(7, "tea", "coffee")
		read := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsRead, Conversation: guest, Text: "An answer to read aloud.",
			Created: base()}
		must(t, s.SaveButtons(ctx(t), q))
		must(t, s.SaveButtons(ctx(t), read))
		wantButtons(t, s, q)
		wantButtons(t, s, read)
		must(t, s.PlaceButtons(ctx(t), q.ID, 555))
		q.MessageID = 555
		must(t, s.KeepButtonsFile(ctx(t), read.ID, "/data/voice/answer.ogg"))
		read.File = "/data/voice/answer.ogg"
		// Buttons unknown (expired, pruned) are placed nowhere, without
		// an error: the message is out already.
		unknown := state.NewButtonsID()
		must(t, s.PlaceButtons(ctx(t), unknown, 556))
		must(t, s.KeepButtonsFile(ctx(t), unknown, "/data/voice/lost.ogg"))
		if _, ok, err := s.LookupButtons(ctx(t), unknown); err != nil || ok {
			t.Errorf("LookupButtons of buttons only placed = ok %v, %v; want none", ok, err)
		}
		s.restarted()
		wantButtons(t, s, q)
		wantButtons(t, s, read)
	}},
	{"UseOnce", func(t *testing.T, s *subject) {
		stop := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsStop, Conversation: chat, User: 7, Created: base()}
		must(t, s.SaveButtons(ctx(t), stop))
		wantUse(t, s, stop.ID, 100, true)
		// The same tap again (its update replayed after a restart) uses
		// them still; another tap finds them used.
		wantUse(t, s, stop.ID, 100, true)
		wantUse(t, s, stop.ID, 101, false)
		stop.UsedBy = 100
		wantButtons(t, s, stop)
		wantUse(t, s, state.NewButtonsID(), 102, false)
	}},
	{"NewQuestionClosesTheOpenOne", func(t *testing.T, s *subject) {
		first, second := question(7, "a", "b"), question(7, "c", "d")
		must(t, s.SaveButtons(ctx(t), first))
		must(t, s.PlaceButtons(ctx(t), first.ID, 10))
		must(t, s.SaveButtons(ctx(t), second))
		first.MessageID, first.UsedBy = 10, state.ButtonsClosed
		wantButtons(t, s, first)
		wantUse(t, s, first.ID, 200, false)
		wantButtons(t, s, second)
		wantUse(t, s, second.ID, 201, true)
	}},
	{"CloseQuestionsOfUser", func(t *testing.T, s *subject) {
		q := question(7, "yes", "no")
		must(t, s.SaveButtons(ctx(t), q))
		must(t, s.PlaceButtons(ctx(t), q.ID, 20))
		if closed, err := s.CloseQuestions(ctx(t), q.Conversation, 8); err != nil || len(closed) != 0 {
			t.Fatalf("CloseQuestions by another user = %+v, %v; want none: the question is user 7's", closed, err)
		}
		if closed, err := s.CloseQuestions(ctx(t), chat, 7); err != nil || len(closed) != 0 {
			t.Fatalf("CloseQuestions in another conversation = %+v, %v; want none", closed, err)
		}
		closed, err := s.CloseQuestions(ctx(t), q.Conversation, 7)
		must(t, err)
		wantClosed(t, closed, q.ID, 20)
		if closed, err := s.CloseQuestions(ctx(t), q.Conversation, 7); err != nil || len(closed) != 0 {
			t.Errorf("CloseQuestions again = %+v, %v; want none: it is closed", closed, err)
		}
		wantUse(t, s, q.ID, 300, false)
	}},
	{"CloseQuestionsToAnyone", func(t *testing.T, s *subject) {
		q := question(7, "yes", "no")
		must(t, s.SaveButtons(ctx(t), q))
		read := state.Buttons{ID: state.NewButtonsID(), Kind: state.ButtonsRead, Conversation: q.Conversation, Created: base()}
		must(t, s.SaveButtons(ctx(t), read))
		closed, err := s.CloseQuestions(ctx(t), q.Conversation, 0)
		must(t, err)
		wantClosed(t, closed, q.ID, 0)
		wantUse(t, s, read.ID, 301, true) // only questions close
	}},
	{"QuestionToAnyoneStaysOpenForOneUser", func(t *testing.T, s *subject) {
		q := question(0, "yes", "no")
		must(t, s.SaveButtons(ctx(t), q))
		if closed, err := s.CloseQuestions(ctx(t), q.Conversation, 7); err != nil || len(closed) != 0 {
			t.Fatalf("CloseQuestions by user 7 of a question to anyone = %+v, %v; want none", closed, err)
		}
		wantUse(t, s, q.ID, 302, true)
	}},
}

func wantButtons(t *testing.T, s *subject, want state.Buttons) {
	t.Helper()
	got, ok, err := s.LookupButtons(ctx(t), want.ID)
	switch {
	case err != nil:
		t.Fatal(err)
	case !ok:
		t.Fatalf("LookupButtons(%s): none, want %+v", want.ID, want)
	}
	if !sameButtons(got, want) {
		t.Errorf("LookupButtons(%s) = %+v\nwant %+v", want.ID, got, want)
	}
}

func sameButtons(a, b state.Buttons) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Conversation == b.Conversation && a.MessageID == b.MessageID &&
		a.User == b.User && slices.Equal(a.Options, b.Options) && a.Text == b.Text && a.Created.Equal(b.Created) &&
		a.UsedBy == b.UsedBy && a.File == b.File
}

func wantUse(t *testing.T, s *subject, id string, update int64, want bool) {
	t.Helper()
	got, err := s.UseButtons(ctx(t), id, update)
	must(t, err)
	if got != want {
		t.Errorf("UseButtons(%s, %d) = %v, want %v", id, update, got, want)
	}
}

// wantClosed checks what CloseQuestions returned: the one question, with
// what its caller needs to take its buttons away.
func wantClosed(t *testing.T, closed []state.Buttons, id string, messageID int) {
	t.Helper()
	if len(closed) != 1 {
		t.Fatalf("CloseQuestions = %+v, want question %s", closed, id)
	}
	q := closed[0]
	if q.ID != id || q.MessageID != messageID || q.Kind != state.ButtonsQuestion || q.Conversation != topic ||
		q.UsedBy != state.ButtonsClosed {
		t.Errorf("CloseQuestions = %+v, want question %s under message %d, closed", q, id, messageID)
	}
}

func panelRun(id string, chat int64, messageID int) state.PanelRun {
	return state.PanelRun{ID: id, Chat: chat, Thread: 3, MessageID: messageID, Run: []byte(`{"turn":0}`), Created: base()}
}

var panelTests = []behaviour{
	{"OnePerMessageOnePerChat", func(t *testing.T, s *subject) {
		must(t, s.StartPanel(ctx(t), panelRun("p1", -100, 1)))
		if err := s.StartPanel(ctx(t), panelRun("p1-again", -100, 1)); !errors.Is(err, state.ErrPanelStarted) {
			t.Errorf("StartPanel for the same message = %v, want ErrPanelStarted", err)
		}
		if err := s.StartPanel(ctx(t), panelRun("p2", -100, 2)); !errors.Is(err, state.ErrPanelBusy) {
			t.Errorf("StartPanel in a chat where one runs = %v, want ErrPanelBusy", err)
		}
		must(t, s.StartPanel(ctx(t), panelRun("p3", -200, 1)))
		must(t, s.SavePanel(ctx(t), "p1", []byte(`{"turn":1}`), false, base()))
		if err := s.StartPanel(ctx(t), panelRun("p4", -100, 4)); !errors.Is(err, state.ErrPanelBusy) {
			t.Errorf("StartPanel after a step of the chat's run = %v, want ErrPanelBusy", err)
		}
		must(t, s.SavePanel(ctx(t), "p1", []byte(`{"turn":2}`), true, base()))
		must(t, s.StartPanel(ctx(t), panelRun("p5", -100, 5)))
		if err := s.StartPanel(ctx(t), panelRun("p1-late", -100, 1)); !errors.Is(err, state.ErrPanelStarted) {
			t.Errorf("StartPanel for a finished run's message = %v, want ErrPanelStarted", err)
		}
	}},
	{"RefusedAsBusyClaimsNothing", func(t *testing.T, s *subject) {
		must(t, s.StartPanel(ctx(t), panelRun("p1", -100, 1)))
		if err := s.StartPanel(ctx(t), panelRun("p2", -100, 2)); !errors.Is(err, state.ErrPanelBusy) {
			t.Fatalf("StartPanel in a busy chat = %v, want ErrPanelBusy", err)
		}
		must(t, s.SavePanel(ctx(t), "p1", []byte(`{}`), true, base()))
		if err := s.StartPanel(ctx(t), panelRun("p2", -100, 2)); err != nil {
			t.Errorf("StartPanel of the refused message once the chat is free = %v, want it started", err)
		}
	}},
	{"SaveUnknownFails", func(t *testing.T, s *subject) {
		if err := s.SavePanel(ctx(t), "nobody", []byte(`{}`), false, base()); err == nil {
			t.Error("SavePanel of an unknown run = nil, want an error")
		}
	}},
	{"RunningAfterRestartOnce", func(t *testing.T, s *subject) {
		left := panelRun("left", -100, 1)
		must(t, s.StartPanel(ctx(t), left))
		must(t, s.SavePanel(ctx(t), "left", []byte(`{"turn":3}`), false, base()))
		must(t, s.StartPanel(ctx(t), panelRun("done", -200, 1)))
		must(t, s.SavePanel(ctx(t), "done", []byte(`{"turn":9}`), true, base()))
		wantRunning(t, s, nil) // its own runs are not to take up
		s.restarted()
		left.Run = []byte(`{"turn":3}`)
		wantRunning(t, s, []state.PanelRun{left})
		wantRunning(t, s, nil)
		// Taken up, it runs here: its chat is still busy.
		if err := s.StartPanel(ctx(t), panelRun("next", -100, 2)); !errors.Is(err, state.ErrPanelBusy) {
			t.Errorf("StartPanel beside a run taken up = %v, want ErrPanelBusy", err)
		}
		must(t, s.SavePanel(ctx(t), "left", []byte(`{"turn":4}`), true, base()))
		must(t, s.StartPanel(ctx(t), panelRun("after", -100, 3)))
	}},
}

func wantRunning(t *testing.T, s *subject, want []state.PanelRun) {
	t.Helper()
	got, err := s.RunningPanels(ctx(t))
	must(t, err)
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.ID == w.ID && g.Chat == w.Chat && g.Thread == w.Thread && g.MessageID == w.MessageID &&
			string(g.Run) == string(w.Run) && g.Created.Equal(w.Created)
	}
	if !same {
		t.Errorf("RunningPanels = %+v\nwant %+v", got, want)
	}
}

var holderTests = []behaviour{
	{"HoldListReplace", func(t *testing.T, s *subject) {
		wantHolders(t, s, map[string]string{})
		now := base()
		must(t, s.HoldTelegramBot(ctx(t), "123456", "alice", now))
		must(t, s.HoldTelegramBot(ctx(t), "789", "bob", now))
		wantHolders(t, s, map[string]string{"123456": "alice", "789": "bob"})
		must(t, s.HoldTelegramBot(ctx(t), "123456", "carol", now.Add(time.Hour)))
		s.restarted()
		wantHolders(t, s, map[string]string{"123456": "carol", "789": "bob"})
	}},
}

func wantHolders(t *testing.T, s *subject, want map[string]string) {
	t.Helper()
	got, err := s.TelegramBotHolders(ctx(t))
	must(t, err)
	if len(got) != len(want) {
		t.Fatalf("TelegramBotHolders = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("TelegramBotHolders = %v, want %v", got, want)
		}
	}
}
