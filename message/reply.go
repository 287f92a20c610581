package message

import "errors"

// Action is the status a chat shows while the bot works on an answer.
type Action string

const (
	Typing      Action = "typing"
	RecordVoice Action = "record_voice"
	UploadPhoto Action = "upload_photo"
)

// FileKind is how a generated file is sent.
type FileKind int

const (
	VoiceNote FileKind = iota // a voice message
	Picture                   // a photo (a document where Telegram refuses it as one)
)

// Errors the transport reports in brainbot's words.
var (
	// ErrBlocked: the user blocked the bot; nothing reaches them.
	ErrBlocked = errors.New("user blocked the bot")
	// ErrTooBig: a file turned out larger than its kind's limit, though
	// Telegram's message did not say so.
	ErrTooBig = errors.New("file over its limit")
)
