package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	tgbot "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"brainbot/message"
)

// mediaOf is the file msg carries, if any: everything a user may send on
// purpose besides text. Telegram puts at most one in a message.
func mediaOf(msg *models.Message) (message.Attachment, bool) {
	switch {
	case msg.Voice != nil:
		v := msg.Voice
		return message.Attachment{Kind: message.Voice, FileID: v.FileID, Size: v.FileSize, MIME: v.MimeType, Seconds: v.Duration}, true
	case msg.Audio != nil:
		a := msg.Audio
		return message.Attachment{Kind: message.Audio, FileID: a.FileID, Size: a.FileSize, MIME: a.MimeType, Name: a.FileName, Seconds: a.Duration}, true
	case len(msg.Photo) > 0:
		return largestPhoto(msg.Photo), true
	case msg.Animation != nil:
		// Before Document: Telegram sends a GIF as both.
		return message.Attachment{Kind: message.Other, What: "animation"}, true
	case msg.Document != nil:
		d := msg.Document
		return message.Attachment{Kind: message.DocumentKind(d.MimeType, d.FileName), What: "file", FileID: d.FileID, Size: d.FileSize,
			MIME: d.MimeType, Name: d.FileName}, true
	}
	for what, sent := range map[string]bool{
		"sticker": msg.Sticker != nil, "video": msg.Video != nil, "video note": msg.VideoNote != nil,
		"location": msg.Location != nil || msg.Venue != nil, "contact": msg.Contact != nil, "poll": msg.Poll != nil,
		"dice": msg.Dice != nil, "game": msg.Game != nil, "story": msg.Story != nil, "paid media": msg.PaidMedia != nil,
		"checklist": msg.Checklist != nil, "live photo": msg.LivePhoto != nil,
	} {
		if sent {
			return message.Attachment{Kind: message.Other, What: what}, true
		}
	}
	return message.Attachment{}, false
}

// largestPhoto picks, of the sizes Telegram offers of a photo, the
// largest within the image limit (the smallest if none is).
func largestPhoto(sizes []models.PhotoSize) message.Attachment {
	best := slices.MinFunc(sizes, func(a, b models.PhotoSize) int { return a.FileSize - b.FileSize })
	for _, s := range sizes {
		if int64(s.FileSize) <= message.MaxBytes[message.Image] && s.Width*s.Height > best.Width*best.Height {
			best = s
		}
	}
	return message.Attachment{Kind: message.Image, FileID: best.FileID, Size: int64(best.FileSize), MIME: "image/jpeg"}
}

// fileTimeout bounds one download from Telegram.
const fileTimeout = 2 * time.Minute

// Fetch downloads a file the bot received (getFile, then the file),
// never holding more than limit bytes: a larger file is
// message.ErrTooBig. Its errors never carry the download URL, which holds
// the token.
func (c *Client) Fetch(ctx context.Context, fileID string, limit int64) ([]byte, error) {
	var f *models.File
	err := c.t.retry(ctx, "getFile", func(ctx context.Context) error {
		var err error
		f, err = c.api.GetFile(ctx, &tgbot.GetFileParams{FileID: fileID})
		return err
	})
	if err != nil {
		return nil, err
	}
	if f.FileSize > limit {
		return nil, message.ErrTooBig
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.api.FileDownloadLink(f), nil)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", f.FilePath, withoutURL(err))
	}
	resp, err := c.t.files.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download %s: %w", f.FilePath, withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download %s: HTTP %d", f.FilePath, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("download %s: %w", f.FilePath, withoutURL(err))
	case int64(len(data)) > limit:
		return nil, message.ErrTooBig
	}
	return data, nil
}

// withoutURL drops the download URL, which holds the bot's token, from a
// client error.
func withoutURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return fmt.Errorf("%s: %w", uerr.Op, uerr.Err)
	}
	return err
}
