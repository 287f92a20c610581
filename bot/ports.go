package bot

import (
	"brainbot/bot/conversation"
	"brainbot/bot/panel/host"
)

// Speaker speaks text with a brain's voice settings (*mcp.Speaker): for
// the panels and for the conversations alike.
type Speaker interface {
	host.Speaker
	conversation.Speaker
}
