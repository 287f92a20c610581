package conversation

import (
	"go.uber.org/zap"

	"brainbot/message"
)

// outbox is where in's answer goes: its chat, or for a guest message
// (the bot summoned where it is not a member) the guest query, answered
// once in text.
func outbox(chats Chats, in *message.Inbound, log *zap.Logger) Outbox {
	if in.Guest != nil {
		return chats.GuestOutbox(in.Key.Bot, in.Guest.QueryID, log)
	}
	return chats.Outbox(in.Key, in.InGroup(), in.MessageID, log)
}
