package intake

import "time"

// Backlog is what one bot has in the intake now.
type Backlog struct {
	// Waiting counts the messages queued in its conversations, behind
	// the one each answers; Answering the conversations answering one.
	Waiting   int `json:"waiting"`
	Answering int `json:"answering"`
	// Gathering counts the messages of albums still arriving: an album
	// is queued once its last photo or file came (AlbumWait).
	Gathering int `json:"gathering"`
	// Parked counts the updates kept aside until the bot connects.
	Parked int `json:"parked"`
	// LastUpdate is when its latest update handed over here came in
	// (zero: none since the start).
	LastUpdate time.Time `json:"last_update,omitzero"`
}

// Backlog says what bot has in the intake now.
func (in *Intake) Backlog(bot string) Backlog {
	gathering := in.albums.gathering(bot)
	in.mu.Lock()
	defer in.mu.Unlock()
	b := Backlog{Gathering: gathering, Parked: len(in.parked[bot]), LastUpdate: in.last[bot]}
	for key, q := range in.queues {
		if key.Bot != bot {
			continue
		}
		b.Waiting += len(q.waiting)
		if q.running != nil {
			b.Answering++
		}
	}
	return b
}
