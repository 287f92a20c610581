package telegram

import "github.com/go-telegram/bot/models"

// entitySpan is where entity e lies in a text of units UTF-16 code units
// (Telegram counts offsets and lengths in them): units[start:end]. ok is
// false when e does not fit the text. The numbers come from the update
// like any other input: a negative, out-of-range or overflowing offset or
// length is refused here, before anything slices with it.
func entitySpan(units []uint16, e models.MessageEntity) (start, end int, ok bool) {
	if e.Offset < 0 || e.Length <= 0 || e.Offset > len(units) || e.Length > len(units)-e.Offset {
		return 0, 0, false
	}
	return e.Offset, e.Offset + e.Length, true
}
