package bot

import (
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"
)

// albumWindow is how long the messages of one album are taken as one:
// Telegram sends them as separate messages within a second or so, and has
// no "album complete" signal.
const albumWindow = time.Minute

// albums tells the first message of an album (photos or files sent
// together share a media_group_id) from the rest, so an album is answered
// once. The zero value is ready to use; it is not safe for concurrent use.
type albums map[string]time.Time

// seen reports whether msg belongs to an album whose first message came
// before, and remembers the album otherwise.
func (a *albums) seen(msg *models.Message) bool {
	if msg == nil || msg.MediaGroupID == "" {
		return false
	}
	now := time.Now()
	if *a == nil {
		*a = albums{}
	}
	for k, first := range *a {
		if now.Sub(first) > albumWindow {
			delete(*a, k)
		}
	}
	key := strconv.FormatInt(msg.Chat.ID, 10) + "/" + msg.MediaGroupID
	if _, ok := (*a)[key]; ok {
		return true
	}
	(*a)[key] = now
	return false
}
