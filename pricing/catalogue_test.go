package pricing

import (
	"testing"

	"brainbot/toolspec"
)

// Every speech and transcription model and every image model, size and
// quality a brain may choose (package toolspec) has a price: a model added to the catalogue
// without one would be served and never counted against the daily caps.
func TestEveryToolspecChoiceHasAPrice(t *testing.T) {
	for _, model := range toolspec.SpeechModels() {
		if _, ok := Speech(model, 100); !ok {
			t.Errorf("speech model %s has no price", model)
		}
	}
	for _, model := range toolspec.TranscriptionModels() {
		if _, ok := Transcription(model, 60); !ok {
			t.Errorf("transcription model %s has no price", model)
		}
	}
	for _, m := range toolspec.ImageModels() {
		qualities := append([]string{""}, m.Qualities...) // "": the brain leaves it out
		for _, size := range m.Sizes {
			for _, q := range qualities {
				if _, ok := Image(m.Name, size, q); !ok {
					t.Errorf("image %s %s quality %q has no price", m.Name, size, q)
				}
			}
		}
	}
}
