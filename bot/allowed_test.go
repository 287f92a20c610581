package bot

import (
	"slices"
	"testing"

	"brainbot/bot/telegram"
)

// A bot asks Telegram for exactly the kinds of update brainbot handles,
// by polling and by webhook alike: Telegram keeps the last list a bot
// gave, so one setup asking for less would silence that kind in both.
func TestAllowedUpdatesAreAskedForInEverySetup(t *testing.T) {
	for name, cfg := range map[string]func(*Config){
		"polling": nil,
		"webhook": func(c *Config) { c.WebhookURL = "https://bots.example.com/telegram" },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, map[string]string{"alpha": brainFile(tokenA, "")}, cfg)
			if name == "polling" {
				h.exchange(tokenA, 7, "probe") // answered: it has polled
			} else {
				h.waitLog("telegram webhook set")
			}
			if got := h.srv.AllowedUpdates(tokenA); !slices.Equal(got, telegram.AllowedUpdates) {
				t.Errorf("allowed_updates %v, want %v", got, telegram.AllowedUpdates)
			}
		})
	}
}
