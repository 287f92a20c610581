package toolspec

import (
	"errors"
	"strings"
	"testing"
)

func TestQuestionCheck(t *testing.T) {
	long := strings.Repeat("x", MaxOptionLen+1)
	for _, tt := range []struct {
		name    string
		args    QuestionArgs
		problem string // "" for a valid question
	}{
		{"two options", QuestionArgs{Question: " Which city? ", Options: []string{" Paris", "Rome "}}, ""},
		{"eight options", QuestionArgs{Question: "Pick", Options: strings.Split("a b c d e f g h", " ")}, ""},
		{"no question", QuestionArgs{Question: "  ", Options: []string{"a", "b"}}, "question is required"},
		{"one option", QuestionArgs{Question: "Pick", Options: []string{"a"}}, "1 options; give 2 to 8"},
		{"nine options", QuestionArgs{Question: "Pick", Options: strings.Split("a b c d e f g h i", " ")}, "9 options"},
		{"empty option", QuestionArgs{Question: "Pick", Options: []string{"a", " "}}, "option 2 is empty"},
		{"long option", QuestionArgs{Question: "Pick", Options: []string{"a", long}}, "option 2 is longer than 64"},
		{"two lines", QuestionArgs{Question: "Pick", Options: []string{"a\nb", "c"}}, "option 1 has a line break"},
		{"repeated", QuestionArgs{Question: "Pick", Options: []string{"a", "b", " a"}}, "option 3 repeats"},
		{"long question", QuestionArgs{Question: strings.Repeat("é", MaxQuestionLen+1), Options: []string{"a", "b"}}, "longer than 300"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.args.Check()
			switch {
			case tt.problem == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem) || !errors.Is(err, ErrQuestion)):
				t.Fatalf("Check() = %v, want an ErrQuestion saying %q", err, tt.problem)
			}
		})
	}
	args := QuestionArgs{Question: " Which city? ", Options: []string{" Paris", "Rome "}}
	if err := args.Check(); err != nil || args.Question != "Which city?" || args.Options[0] != "Paris" || args.Options[1] != "Rome" {
		t.Errorf("Check left %+v (%v), want the spaces trimmed", args, err)
	}
}
