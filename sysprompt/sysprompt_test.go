package sysprompt

import (
	"slices"
	"testing"
	"time"
)

func TestUnknown(t *testing.T) {
	text := "Hi {{user_first_name}}, it is {{ date }}. {{mood}} {{ mood }} {{Time}} {{not a var}} {single} {{9x}}"
	if got, want := Unknown(text), []string{"mood", "Time"}; !slices.Equal(got, want) {
		t.Errorf("Unknown = %q, want %q", got, want)
	}
	if got := Unknown("You are {{bot_name}} ({{chat_type}}, {{user_language}}), {{weekday}} {{time}}"); got != nil {
		t.Errorf("Unknown of known variables = %q", got)
	}
}

func TestFill(t *testing.T) {
	got := Fill("I am {{bot_name}}; hello {{ user_first_name }}! {{bot_name}} again. {{mood}} {{date}}",
		Vars{BotName: "Ann", UserFirstName: "Bob {{date}}", Date: ""})
	// A value is inserted as it is: variables inside it are not filled.
	if want := "I am Ann; hello Bob {{date}}! Ann again. {{mood}} "; got != want {
		t.Errorf("Fill = %q, want %q", got, want)
	}
	if got := Fill("{{date}}", nil); got != "{{date}}" {
		t.Errorf("Fill without values = %q", got)
	}
}

func TestFactsVars(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// 23:30 UTC on a Sunday is already Monday in Berlin.
	now := time.Date(2026, 11, 22, 23, 30, 0, 0, time.UTC)
	got := Facts{BotName: "Clock", UserFirstName: " Ann ", UserLanguage: "de", ChatType: "private", Now: now, Location: berlin}.Vars()
	want := Vars{BotName: "Clock", UserFirstName: "Ann", UserLanguage: "de", ChatType: "private",
		Date: "2026-11-23", Weekday: "Monday", Time: "00:30 CET"}
	if len(got) != len(want) {
		t.Fatalf("Vars = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if got := (Facts{Now: now}).Vars(); got[Time] != "23:30 UTC" || got[Weekday] != "Sunday" {
		t.Errorf("no location: time %q weekday %q, want UTC", got[Time], got[Weekday])
	}
	for _, name := range Names() {
		if _, ok := got[name]; !ok {
			t.Errorf("Vars has no %s", name)
		}
	}
}
