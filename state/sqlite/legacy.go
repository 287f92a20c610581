package sqlite

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"

	"brainbot/message"
)

// legacyUpdate is the Telegram update a journal entry of an earlier
// release stands for: those releases kept what the bot read of a message
// (its chat, sender, text and files), not the update. Read back through
// telegram.Decode it is the message the bot had accepted; a text that
// starts with a /word was a command (the entities were not kept). Files
// the entry cannot describe are left out (the error says so); the text
// still comes.
func legacyUpdate(e Entry) ([]byte, error) {
	msg := map[string]any{
		"message_id": e.MessageID,
		"date":       e.Created.Unix(),
		"chat":       map[string]any{"id": e.Chat, "type": e.ChatType},
		"from":       map[string]any{"id": e.User, "is_bot": false, "first_name": e.Sender},
	}
	if e.Thread != 0 {
		msg["message_thread_id"], msg["is_topic_message"] = e.Thread, true
	}
	files, err := decodeMedia(e.Media)
	for _, a := range files {
		field, value := legacyFile(a)
		msg[field] = value
		if a.Album != "" {
			msg["media_group_id"] = a.Album
		}
	}
	switch {
	case len(files) > 0:
		msg["caption"] = e.Text
	case strings.HasPrefix(e.Text, "/"):
		word, _, _ := strings.Cut(e.Text, " ")
		msg["text"] = e.Text
		msg["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": len(utf16.Encode([]rune(word)))}}
	default:
		msg["text"] = e.Text
	}
	raw, merr := json.Marshal(map[string]any{"update_id": 0, "message": msg})
	if merr != nil {
		return nil, merr
	}
	return raw, err
}

// legacyFile is the message field that carries a's file, as Telegram
// would have sent it.
func legacyFile(a message.Attachment) (string, any) {
	file := map[string]any{"file_id": a.FileID, "file_unique_id": a.FileID, "file_size": a.Size}
	switch a.Kind {
	case message.Voice:
		file["mime_type"], file["duration"] = a.MIME, a.Seconds
		return "voice", file
	case message.Audio:
		file["mime_type"], file["duration"], file["file_name"] = a.MIME, a.Seconds, a.Name
		return "audio", file
	case message.Image:
		if a.What == "" { // a photo
			return "photo", []map[string]any{{"file_id": a.FileID, "file_unique_id": a.FileID, "file_size": a.Size}}
		}
	case message.Other:
		if a.What != "file" {
			return strings.ReplaceAll(a.What, " ", "_"), map[string]any{}
		}
	}
	file["mime_type"], file["file_name"] = a.MIME, a.Name
	return "document", file
}

// decodeMedia reads the files a journal entry of an earlier release kept.
func decodeMedia(s string) ([]message.Attachment, error) {
	if s == "" {
		return nil, nil
	}
	var files []message.Attachment
	if err := json.Unmarshal([]byte(s), &files); err != nil {
		return nil, fmt.Errorf("journaled files: %w", err)
	}
	return files, nil
}
