package intake

import (
	"strings"
	"sync"
	"time"

	"brainbot/message"
)

// AlbumWait is how long an album stays open after its latest message:
// Telegram sends the photos or files of an album as separate messages
// sharing a media_group_id, within a second or so, and has no "album
// complete" signal.
const AlbumWait = time.Second

// maxAlbum is the most messages Telegram puts in one album.
const maxAlbum = 10

// albums gathers the messages of each album into its first message, so
// the model gets all the files in one request and the user one answer.
// Each message stays in its log until the album is answered, so a crash
// loses none: after a restart they are handed over again, and gathered
// again. An album is queued AlbumWait after its latest message, when it is
// full, or when another message of its conversation arrives (answers keep
// the order of messages). The log's callback adds; timers queue.
type albums struct {
	enqueue func(*message.Inbound)
	// work counts open albums with the requests in flight, so shutdown
	// waits for them to be queued.
	work *sync.WaitGroup

	mu   sync.Mutex
	open map[string]*album
}

type album struct {
	in    *message.Inbound // the first message, which the others join
	count int
	timer *time.Timer
}

func newAlbums(enqueue func(*message.Inbound), work *sync.WaitGroup) *albums {
	return &albums{enqueue: enqueue, work: work, open: map[string]*album{}}
}

// albumKey names the album group of a conversation ("" for a message
// outside any album).
func albumKey(c message.Key, group string) string {
	if group == "" {
		return ""
	}
	return albumPrefix(c) + group
}

// albumPrefix starts the keys of a conversation's albums.
func albumPrefix(c message.Key) string { return c.String() + "/" }

// isOpen reports whether album key is gathering messages.
func (a *albums) isOpen(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return key != "" && a.open[key] != nil
}

// add gathers in, a message of album key.
func (a *albums) add(key string, in *message.Inbound) {
	a.mu.Lock()
	al := a.open[key]
	if al == nil {
		a.work.Add(1)
		al = &album{in: in}
		al.timer = time.AfterFunc(AlbumWait, func() { a.close(key, al) })
		a.open[key] = al
	} else {
		join(al.in, in)
		al.timer.Reset(AlbumWait)
	}
	al.count++
	full := al.count == maxAlbum
	a.mu.Unlock()
	if full {
		a.close(key, al)
	}
}

// flush queues the open albums of conversation c now.
func (a *albums) flush(c message.Key) {
	prefix := albumPrefix(c)
	a.mu.Lock()
	var due []string
	for key := range a.open {
		if strings.HasPrefix(key, prefix) {
			due = append(due, key)
		}
	}
	a.mu.Unlock()
	for _, key := range due {
		a.close(key, nil)
	}
}

// close queues album key, if it is still open (and, when al is given,
// still that album: a late timer must not close its successor).
func (a *albums) close(key string, al *album) {
	a.mu.Lock()
	defer a.mu.Unlock()
	open := a.open[key]
	if open == nil || al != nil && open != al {
		return
	}
	delete(a.open, key)
	open.timer.Stop()
	// Queued before a.mu is let go, so that take finds every album open
	// or queued already, never between. Lock order: a.mu, then the
	// intake's (which never calls albums while holding its own).
	a.enqueue(open.in)
	a.work.Done()
}

// take takes out, unqueued, the open albums of the conversations mine
// accepts: each is handed to each (its messages gathered in one), then
// no longer counted as work. It returns how many messages they held.
func (a *albums) take(mine func(message.Key) bool, each func(*message.Inbound)) int {
	a.mu.Lock()
	var taken []*album
	for key, al := range a.open {
		if mine(al.in.Key) {
			delete(a.open, key)
			al.timer.Stop()
			taken = append(taken, al)
		}
	}
	a.mu.Unlock()
	n := 0
	for _, al := range taken {
		n += al.count
		each(al.in)
		a.work.Done()
	}
	return n
}

// gathering counts the messages of bot's open albums.
func (a *albums) gathering(bot string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, al := range a.open {
		if al.in.Key.Bot == bot {
			n += al.count
		}
	}
	return n
}

// join adds a later message of in's album to in: its files, its caption
// and its deliveries.
func join(in, later *message.Inbound) {
	in.Media = append(in.Media, later.Media...)
	if later.Text != "" {
		in.Text = strings.TrimSpace(in.Text + "\n\n" + later.Text)
	}
	in.Progress.(*progress).join(later.Progress)
}
