package pricing

import (
	"math"
	"testing"
)

func TestPrices(t *testing.T) {
	tests := []struct {
		name string
		usd  float64
		ok   bool
		want float64
	}{
		{"1000 characters of tts-1", must(Speech("tts-1", 1000)), true, 0.015},
		{"1000 characters of tts-1-hd", must(Speech("tts-1-hd", 1000)), true, 0.030},
		{"dall-e-2 256x256 (quality ignored)", must(Image("dall-e-2", "256x256", "hd")), true, 0.016},
		{"dall-e-3 wide hd", must(Image("dall-e-3", "1792x1024", "hd")), true, 0.120},
		{"dall-e-3 default quality", must(Image("dall-e-3", "1024x1024", "")), true, 0.040},
		{"gpt-image-1 auto: priced as the most it may cost", must(Image("gpt-image-1", "auto", "auto")), true, 0.167},
		{"a minute with whisper-1", must(Transcription("whisper-1", 60)), true, 0.006},
	}
	for _, tt := range tests {
		if math.Abs(tt.usd-tt.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", tt.name, tt.usd, tt.want)
		}
	}
	if _, ok := Speech("tts-9", 10); ok {
		t.Error("an unknown speech model has a price")
	}
	if _, ok := Image("dall-e-2", "1792x1024", ""); ok {
		t.Error("a size dall-e-2 does not make has a price")
	}
}

func must(usd float64, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return usd
}
