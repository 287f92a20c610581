package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"brainbot/message"
	"brainbot/state"
)

// UserData is what the store keeps of users as an admin sees it: their
// conversations, listed, and all of a user's, forgotten on request
// (state.Conversations).
type UserData struct{ db *db }

var _ state.Conversations = (*UserData)(nil)

// withUser is the SQL condition of a conversation (chat_id, thread_id)
// being with user ?1 (message.Key.User): a private chat's other party, or
// a guest conversation's caller (Thread -user).
const withUser = `((chat_id = ?1 AND thread_id >= 0) OR thread_id = -?1)`

// ofBot is the condition of bot ?2, or every bot when ?2 is "".
const ofBot = `(?2 = '' OR bot = ?2)`

// Conversations lists the conversations f selects, the most recently
// used first.
func (c *UserData) Conversations(ctx context.Context, f state.ConversationFilter) ([]state.Conversation, error) {
	where := []string{ofBot}
	if f.User != 0 {
		where = append(where, withUser)
	}
	rows, err := c.db.QueryContext(ctx, `SELECT bot, chat_id, thread_id, session_id, created, last_used FROM sessions
		WHERE `+strings.Join(where, " AND ")+` ORDER BY last_used DESC, bot, chat_id, thread_id`, f.User, f.Bot)
	if err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	defer rows.Close()
	var out []state.Conversation
	for rows.Next() {
		var conv state.Conversation
		var created, used int64
		if err := rows.Scan(&conv.Key.Bot, &conv.Key.Chat, &conv.Key.Thread, &conv.Session.ID, &created, &used); err != nil {
			return nil, fmt.Errorf("list conversations: %w", err)
		}
		conv.Session.Created, conv.Session.LastUsed = fromMS(created), fromMS(used)
		out = append(out, conv)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list conversations: %w", err)
	}
	return out, nil
}

// ForgetUser deletes, in one transaction, what the database keeps of
// user's with bot ("": every bot); usage records stay, anonymous. What
// it deleted is zeroed (secure_delete), and the write-ahead log, whose
// frames still hold it, emptied before it returns (eraseDeleted).
func (c *UserData) ForgetUser(ctx context.Context, bot string, user int64) (state.Forgotten, error) {
	if user <= 0 {
		return state.Forgotten{}, fmt.Errorf("forget user %d: not a user's id", user)
	}
	forgot := state.Forgotten{Bot: bot, User: user}
	err := c.db.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		if forgot.Conversations, forgot.Sessions, err = userSessions(ctx, tx, bot, user); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM notes WHERE `+ofBot+` AND user_id = ?1`, user, bot).Scan(&forgot.Notes); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM reminders WHERE `+ofBot+` AND user_id = ?1`, user, bot).Scan(&forgot.Reminders); err != nil {
			return err
		}
		for _, stmt := range []string{
			`DELETE FROM sessions WHERE ` + ofBot + ` AND ` + withUser,
			`DELETE FROM session_history WHERE ` + ofBot + ` AND ` + withUser,
			`DELETE FROM buttons WHERE ` + ofBot + ` AND ` + withUser,
			handOverButtons,
			// Their conversations' updates, and what was scheduled for
			// them anywhere (a reminder set in a group).
			`DELETE FROM journal WHERE ` + ofBot + ` AND (` + withUser + ` OR (scheduled IS NOT NULL AND user_id = ?1))`,
			`DELETE FROM voice WHERE ` + ofBot + ` AND user_id = ?1`,
			`DELETE FROM daily WHERE ` + ofBot + ` AND user_id = ?1`,
			`DELETE FROM notes WHERE ` + ofBot + ` AND user_id = ?1`,
			`DELETE FROM reminders WHERE ` + ofBot + ` AND user_id = ?1`,
			`DELETE FROM contacts WHERE ` + ofBot + ` AND user_id = ?1`,
			`DELETE FROM scheduled_log WHERE ` + ofBot + ` AND user_id = ?1`,
			`UPDATE usage SET user_id = 0, chat_id = CASE WHEN chat_id = ?1 THEN 0 ELSE chat_id END
				WHERE ` + ofBot + ` AND user_id = ?1`,
		} {
			if _, err := tx.ExecContext(ctx, stmt, user, bot); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return state.Forgotten{}, fmt.Errorf("forget user %d: %w", user, err)
	}
	c.db.eraseDeleted(ctx)
	return forgot, nil
}

// handOverButtons gives the buttons in other conversations (a group's)
// that name user ?1 to the group's admins, as an anonymous admin's are
// (user_id the chat's id): an answer they asked for may still be stopped,
// by an admin. A question asked of them is closed: it is no one else's
// to answer.
var handOverButtons = `UPDATE buttons SET user_id = chat_id,
	used_by = CASE WHEN kind = '` + state.ButtonsQuestion + `' AND used_by = 0 THEN ` + strconv.Itoa(state.ButtonsClosed) + ` ELSE used_by END
	WHERE ` + ofBot + ` AND user_id = ?1`

// userSessions lists user's conversations with bot and every session
// they had, current and past.
func userSessions(ctx context.Context, tx *sql.Tx, bot string, user int64) ([]message.Key, []string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT bot, chat_id, thread_id, session_id FROM sessions WHERE `+ofBot+` AND `+withUser+`
		UNION SELECT bot, chat_id, thread_id, session_id FROM session_history WHERE `+ofBot+` AND `+withUser+`
		ORDER BY bot, chat_id, thread_id, session_id`, user, bot)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var keys []message.Key
	var sessions []string
	for rows.Next() {
		var k message.Key
		var id string
		if err := rows.Scan(&k.Bot, &k.Chat, &k.Thread, &id); err != nil {
			return nil, nil, err
		}
		if len(keys) == 0 || keys[len(keys)-1] != k {
			keys = append(keys, k)
		}
		sessions = append(sessions, id)
	}
	return keys, sessions, rows.Err()
}

// WatchForgets returns at once: one process has no other instance whose
// forgets it would hear of.
func (c *UserData) WatchForgets(ctx context.Context, fn func(state.Forgotten)) {}
