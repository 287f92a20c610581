package engine

import (
	"fmt"
	"strings"
)

// HoldMarker is a phrase only turn 3's prompt holds (tests hold the
// model's answers to it to stop brainbot between turns 2 and 3).
const HoldMarker = "Comments on your answer"

// question is the model's prompt for it's turn; retry says why the last
// choice of a turn-2 target was refused. Called with s.mu held.
func (s *runState) question(it *Item, retry string) Question {
	run := s.run
	var b strings.Builder
	asker := run.StarterName
	if asker == "" {
		asker = "Someone"
	}
	fmt.Fprintf(&b, "You are %s, on a panel in a group chat with %s. %s asks the panel:\n<question>\n%s\n</question>\n",
		s.name(it.Member), s.others(it.Member), asker, run.Question)
	q := Question{Member: it.Member, Turn: it.Turn}
	switch it.Turn {
	case 1:
		fmt.Fprintf(&b, "\nTurn 1 of 3: answer the question in your own way, in at most %d characters. Your answer is posted to the group as it is; the other panelists answer too, and will comment on one another's answers.", run.MaxChars[0])
	case 2:
		b.WriteString("\nTurn 2 of 3. The other panelists answered:\n")
		targets := s.targets(it.Member)
		for _, m := range targets {
			fmt.Fprintf(&b, "<answer id=%q name=%q>\n%s\n</answer>\n", m, s.name(m), run.item(1, m).Text)
		}
		fmt.Fprintf(&b, "\nComment on exactly one of these answers, in at most %d characters: give its id as target and your comment, which is posted to the group as a reply to that answer.", run.MaxChars[1])
		if retry != "" {
			fmt.Fprintf(&b, "\nYour last choice could not be used (%s). The target must be one of: %s.", retry, strings.Join(targets, ", "))
		}
		q.Schema = CommentSchema
	case 3:
		fmt.Fprintf(&b, "\nTurn 3 of 3. Your answer was:\n<answer>\n%s\n</answer>\n%s:\n", run.item(1, it.Member).Text, HoldMarker)
		for _, m := range it.Comments {
			fmt.Fprintf(&b, "<comment name=%q>\n%s\n</comment>\n", s.name(m), run.item(2, m).Text)
		}
		fmt.Fprintf(&b, "\nReply to these comments in at most %d characters. Your reply is posted to the group.", run.MaxChars[2])
	}
	q.Prompt = b.String()
	return q
}

// others names the other members.
func (s *runState) others(member string) string {
	var names []string
	for _, m := range s.run.Members {
		if m != member {
			names = append(names, s.name(m))
		}
	}
	return strings.Join(names, ", ")
}

// CommentSchema is turn 2's answer: which answer, and the comment. It is
// the same for every member and run (the prompt lists the answers and says
// how long a comment may be; read checks the target), so the process that
// answers it can be started ahead of the turn, a spare.
const CommentSchema = `{"type":"object","properties":{` +
	`"target":{"type":"string","description":"the id of the answer you comment on: one of the ids listed"},` +
	`"comment":{"type":"string","description":"your comment"}},` +
	`"required":["target","comment"],"additionalProperties":false}`
