// Package pricing prices the OpenAI calls brainbot makes for a reply:
// speech, images and (voice messages in) transcription. The Claude CLI
// reports its own cost; OpenAI's answers carry none, so brainbot computes
// it from this table.
//
// Source: OpenAI's API pricing page (platform.openai.com/docs/pricing), as
// published for these models in 2025 and unchanged as far as we know on
// 2026-11-23; it could not be re-read live when this table was written
// (brainbot's build machines reach no website). Update the table when
// OpenAI changes its prices: usage reports and the brains' daily USD
// limits use it.
package pricing

import "strings"

// speechPerMillionChars is USD per million input characters.
// gpt-4o-mini-tts is billed by text tokens in ($0.60/1M) and audio tokens
// out ($12/1M): OpenAI estimates $0.015 a minute of speech, and a minute
// is about 900 characters, so about $17 per million characters.
var speechPerMillionChars = map[string]float64{
	"tts-1":           15,
	"tts-1-hd":        30,
	"gpt-4o-mini-tts": 17,
}

// imagePrices is USD per image by model, then quality ("" for models
// without one), then size.
var imagePrices = map[string]map[string]map[string]float64{
	"dall-e-2": {"": {"256x256": 0.016, "512x512": 0.018, "1024x1024": 0.020}},
	"dall-e-3": {
		"standard": {"1024x1024": 0.040, "1792x1024": 0.080, "1024x1792": 0.080},
		"hd":       {"1024x1024": 0.080, "1792x1024": 0.120, "1024x1792": 0.120},
	},
	"gpt-image-1": {
		"low":    {"1024x1024": 0.011, "1536x1024": 0.016, "1024x1536": 0.016},
		"medium": {"1024x1024": 0.042, "1536x1024": 0.063, "1024x1536": 0.063},
		"high":   {"1024x1024": 0.167, "1536x1024": 0.250, "1024x1536": 0.250},
	},
}

// transcriptionPerMinute is USD per minute of audio.
var transcriptionPerMinute = map[string]float64{
	"whisper-1":              0.006,
	"gpt-4o-transcribe":      0.006,
	"gpt-4o-mini-transcribe": 0.003,
}

// Speech is the price of speaking chars characters with model; ok is false
// for a model the table does not know (the price is then 0).
func Speech(model string, chars int) (usd float64, ok bool) {
	rate, ok := speechPerMillionChars[model]
	return rate * float64(chars) / 1e6, ok
}

// Image is the price of one image. An empty or "auto" quality is priced
// as the model's default: standard for dall-e-3, high for gpt-image-1 (the
// most "auto" may cost); "auto" size as 1024x1024.
func Image(model, size, quality string) (usd float64, ok bool) {
	byQuality, ok := imagePrices[model]
	if !ok {
		return 0, false
	}
	if quality == "" || quality == "auto" {
		quality = map[string]string{"dall-e-3": "standard", "gpt-image-1": "high"}[model]
	}
	if model == "dall-e-2" {
		quality = ""
	}
	if size == "" || size == "auto" {
		size = "1024x1024"
	}
	usd, ok = byQuality[strings.ToLower(quality)][size]
	return usd, ok
}

// Transcription is the price of transcribing seconds of audio with model.
func Transcription(model string, seconds float64) (usd float64, ok bool) {
	rate, ok := transcriptionPerMinute[model]
	return rate * seconds / 60, ok
}
