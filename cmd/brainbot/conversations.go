package main

// brainbot conversations and brainbot forget: the admin's commands that
// ask the running service's admin surface (package admin).

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"brainbot/admin"
)

// conversations lists the conversations of the running service, or shows
// one (conversations show).
func (m *Main) conversations(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "show" {
		return m.showConversation(ctx, args[1:])
	}
	fs := m.newFlagSet("conversations", "conversations [-bot B] [-user U] [-json] [-env-file FILE]\n       brainbot conversations show -bot B -chat C [-thread T] [-json]\n\n"+
		"Lists the conversations the running service keeps, the most recent first: bot, chat, user, last message, the user's messages and transcript size. "+adminWay)
	bot := fs.String("bot", "", "only this bot (its brain file's name without .yaml)")
	user := fs.Int64("user", 0, "only the conversations with this Telegram user's id")
	asJSON := fs.Bool("json", false, "print JSON, for programs")
	client, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	q := url.Values{}
	if *bot != "" {
		q.Set("bot", *bot)
	}
	if *user != 0 {
		q.Set("user", strconv.FormatInt(*user, 10))
	}
	body, err := client.Do(ctx, http.MethodGet, "/conversations", q)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err = m.Stdout.Write(body)
		return err
	}
	var list []admin.ConversationInfo
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("the service's answer: %w", err)
	}
	tw := tabwriter.NewWriter(m.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BOT\tCHAT\tTHREAD\tUSER\tLAST MESSAGE\tMESSAGES\tSIZE\tNOTES\tREMINDERS\tSESSION")
	for _, c := range list {
		size := strconv.FormatInt(c.Bytes, 10) + " B"
		if c.Problem != "" {
			size = "unreadable"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%d\t%d\t%s\n", c.Bot, c.Chat, c.Thread, c.User,
			c.LastMessage.UTC().Format(time.DateTime), c.Messages, size, c.Notes, c.Reminders, c.Session)
	}
	return tw.Flush()
}

// showConversation prints one conversation: as text, or JSON.
func (m *Main) showConversation(ctx context.Context, args []string) error {
	fs := m.newFlagSet("conversations show", "conversations show -bot B -chat C [-thread T] [-json] [-env-file FILE]\n\n"+
		"Prints one conversation of the running service: who said what, in order, the tools the model called and the files they made.")
	bot := fs.String("bot", "", "the bot (its brain file's name without .yaml)")
	chat := fs.Int64("chat", 0, "the chat's id (a private chat's is the user's)")
	thread := fs.Int("thread", 0, "the forum topic, or a guest conversation's (as conversations lists it)")
	asJSON := fs.Bool("json", false, "print JSON, for programs")
	client, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	if *bot == "" || *chat == 0 {
		return usageError{errors.New("-bot and -chat are needed (brainbot conversations lists them)")}
	}
	q := url.Values{"bot": {*bot}, "chat": {strconv.FormatInt(*chat, 10)}, "thread": {strconv.Itoa(*thread)}}
	if *asJSON {
		q.Set("format", "json")
	}
	body, err := client.Do(ctx, http.MethodGet, "/conversations/show", q)
	if err != nil {
		return err
	}
	_, err = m.Stdout.Write(body)
	return err
}

// forget has the running service forget a user.
func (m *Main) forget(ctx context.Context, args []string) error {
	fs := m.newFlagSet("forget", "forget [-bot B] -user U [-env-file FILE]\n\n"+
		"Has the running service forget a user, as their /forget does: their private and guest conversations with the bot (every bot without -bot), "+
		"those conversations' transcripts, the voice notes and pictures made for them, buttons, /voice choice, pending messages and daily counts. "+
		"What stays: a group's conversations, which are everyone's, with the user's words in their transcripts; "+
		"the usage records, without the user's id; and backups made before.")
	bot := fs.String("bot", "", "only this bot (default: every bot)")
	user := fs.Int64("user", 0, "the Telegram user's id")
	client, err := m.adminConfig(fs, args)
	if err != nil {
		return err
	}
	if *user <= 0 {
		return usageError{errors.New("-user is needed: the Telegram user's id")}
	}
	q := url.Values{"user": {strconv.FormatInt(*user, 10)}}
	if *bot != "" {
		q.Set("bot", *bot)
	}
	body, err := client.Do(ctx, http.MethodPost, "/forget", q)
	if err != nil {
		return err
	}
	var a admin.ForgetAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return fmt.Errorf("the service's answer: %w", err)
	}
	fmt.Fprintf(m.Stdout, "user %d forgotten with %s: %s, %s, %s, %s\n", a.User, cmp.Or(a.Bot, "every bot"),
		admin.Counted(a.Conversations, "conversation"), admin.Counted(a.Sessions, "session"), admin.Counted(a.Notes, "note"),
		admin.Counted(a.Reminders, "reminder"))
	return nil
}
