package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"brainbot/bot/panel"
	"brainbot/cmd/internal/stack"
)

// demoGroup is the group the panel meets in.
const demoGroup = -1001

// panelQuestion is what the demo asks the example panel.
const panelQuestion = "should cities ban cars?"

// askPanel sends /panel with a question to the first example panel's
// bots in a group and prints what they posted, turn by turn. ok: the run
// ended well and every member answered.
func askPanel(ctx context.Context, out io.Writer, s *stack.Stack) (ok bool, err error) {
	panels, err := panel.LoadDir(s.PanelsDir)
	if err != nil || len(panels) == 0 {
		return false, fmt.Errorf("no valid example panel in %s: %v", s.PanelsDir, err)
	}
	p := panels[0]
	fmt.Fprintf(out, "user %d in a group with %v: /panel %s\n", stack.GroupUser, p.Members, panelQuestion)
	mark := s.Logs().Len()
	sent := time.Now()
	s.SendGroupCommand(demoGroup, 1, "/panel "+panelQuestion, p.Members...)
	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var summary stack.Line
	_, err = s.Logs().WaitFrom(waitCtx, mark, func(lines []stack.Line) bool {
		for _, l := range lines {
			if l.Msg == "panel" && l.Int("chat") == demoGroup {
				summary = l
				return true
			}
		}
		return false
	}, nil)
	if err != nil {
		return false, fmt.Errorf("the panel did not end: %w\n%s", err, s.Logs().Tail(15))
	}
	for _, post := range s.GroupPosts(demoGroup, p.Members...) {
		what := fmt.Sprintf("%q", post.Text)
		if f, voiced := post.Call.Files["voice"]; voiced {
			length := "unknown length"
			if d, err := voiceDuration(f.Data); err == nil {
				length = d.Round(100 * time.Millisecond).String()
			}
			what = fmt.Sprintf("voice note %s (%s)", f.Name, length)
		}
		fmt.Fprintf(out, "  #%d %s ← %s, a reply to #%d\n", post.ID, post.Bot, what, post.ReplyTo)
	}
	ok = summary.Str("outcome") == "ok" && summary.Int("answers") == int64(len(p.Members))
	result := "ok: the panel ran"
	if !ok {
		result = "FAILED: wanted a panel run that went well (outcome " + summary.Str("outcome") + ")"
	}
	fmt.Fprintf(out, "  %s in %v: %d answers, %d comments, %d replies; files and run.json in %s\n\n",
		result, time.Since(sent).Round(time.Millisecond), summary.Int("answers"), summary.Int("comments"),
		summary.Int("replies"), filepath.Join("$BRAINBOT_DATA", "panel-output", fmt.Sprint(demoGroup), summary.Str("panel_run")))
	return ok, nil
}
