package conversation

import (
	"fmt"
	"strings"

	"go.uber.org/zap"

	"brainbot/bot/brain"
	"brainbot/message"
)

// Commands is what the bot registers with setMyCommands and lists in
// /help; onPanel: the bot is a member of a panel (/panel).
func Commands(b *brain.Brain, onPanel bool) []message.Command {
	cmds := []message.Command{
		{Name: "start", Description: "Say hello"},
		{Name: "help", Description: "What I do and my commands"},
		{Name: "reset", Description: "Start a new conversation"},
		{Name: "stop", Description: "Stop the answer I am writing"},
		{Name: "forget", Description: "Forget our conversation and what I keep of you"},
	}
	if b.TTS.UserToggle {
		cmds = append(cmds, message.Command{Name: "voice", Description: "Switch voice replies on or off"})
	}
	if b.Memory.Enabled {
		cmds = append(cmds, message.Command{Name: "memory", Description: "What I remember about you"})
	}
	if b.Reminders.Enabled {
		cmds = append(cmds, message.Command{Name: "reminders", Description: "Your reminders, to cancel one"})
	}
	if b.CheckIns.Enabled {
		cmds = append(cmds, message.Command{Name: "checkins", Description: "Whether I check in on you: on or off"})
	}
	if onPanel {
		cmds = append(cmds, message.Command{Name: "panel", Description: "Ask the panel a question (in groups)"})
	}
	return cmds
}

func helpText(b *brain.Brain, onPanel bool) string {
	var sb strings.Builder
	sb.WriteString(b.Name)
	if b.Description != "" {
		sb.WriteString(": " + b.Description)
	}
	sb.WriteString("\n\nSend me a message and I will answer.")
	if b.Image.Enabled {
		fmt.Fprintf(&sb, " Ask for a %s and I will make one.", b.Image.Keywords[0])
	}
	sb.WriteString("\n\nCommands:")
	for _, c := range Commands(b, onPanel) {
		fmt.Fprintf(&sb, "\n/%s - %s", c.Name, c.Description)
	}
	return sb.String()
}

// command carries out a bot command without the model and returns the
// reply.
func (p *Pipeline) command(r *request) string {
	b := r.brain
	switch r.in.Command {
	case "start":
		if b.Greeting != "" {
			return b.Greeting
		}
		return helpText(b, p.panels.OnPanel(r.in.Key.Bot))
	case "help":
		return helpText(b, p.panels.OnPanel(r.in.Key.Bot))
	case "reset":
		p.claude.End(r.in.Key.String())
		ended, err := p.store.ResetSession(r.ctx, r.in.Key, p.cfg.Now())
		if err != nil {
			r.log.Error("request failed", zap.String("phase", "reset"), zap.Error(err))
			return b.Messages.Error
		}
		r.log.Info("session reset", zap.String("ended_session", ended))
		return b.Messages.Reset
	case "voice":
		if !b.TTS.UserToggle {
			break
		}
		on, err := p.voiceOn(r)
		if err == nil {
			err = p.store.SetVoice(r.ctx, r.in.Key.Bot, r.in.Sender, !on)
		}
		if err != nil {
			r.log.Error("request failed", zap.String("phase", "voice"), zap.Error(err))
			return b.Messages.Error
		}
		r.log.Info("voice replies switched", zap.Bool("voice", !on))
		if on {
			return "Voice replies are off: I will answer in text."
		}
		return "Voice replies are on: I will answer with voice messages."
	}
	return "I don't know that command. Send /help to see what I can do."
}
