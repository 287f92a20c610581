package mcp

import (
	"context"
	"errors"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/sashabaranov/go-openai"
	"go.uber.org/zap"

	"brainbot/toolspec"
)

// The size of the parts an answer is spoken in while it is written. A
// part is cut at the first sentence end after partChars characters, or
// at a line break after paragraphChars: two or three sentences, about ten
// seconds of speech. Each part is one speech call, and OpenAI's voices
// start each call afresh, so a part of a few words would sound clipped;
// sentence groups keep a natural flow across sentences. Shorter parts
// matter at the end: the last part can only be spoken once the model's
// last word is in, and it takes 0.3 s + 2.5 ms a character at OpenAI's
// pace (about 0.8 s for 200 characters), which turn two's round trip
// (about a second) hides. Longer ones would show.
const (
	partChars      = 160
	paragraphChars = 60
)

// Utterance speaks a text while it is still being written: each part is
// synthesised as soon as it is complete (Write), at most speechParallel
// at once, and the parts are joined into one file once the text is
// complete (Finish, then Audio). It is safe for concurrent use.
type Utterance struct {
	t    *tts
	base openai.CreateSpeechRequest
	// ctx ends with Cancel: every part in flight stops.
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	wg     sync.WaitGroup

	mu sync.Mutex
	// cut is the text handed to parts so far: a prefix of the text.
	cut      string
	parts    []*part
	finished chan struct{} // closed by Finish
	done     bool
	// spoken counts the characters of the parts OpenAI made: what it
	// bills.
	spoken int
	// asked counts the characters handed to speech calls, a dropped
	// part's too (OpenAI may have billed it); max bounds it
	// (SpeechSettings.MaxChars; 0: no bound). full: a part was cut at
	// the bound, so none follows it.
	max, asked int
	full       bool
}

// part is one speech call of an utterance.
type part struct {
	text string
	// end is where the part ends in the text written (bytes).
	end  int
	clip []byte
	err  error
	made chan struct{} // closed when clip or err is set
}

// Begin starts an utterance spoken with settings (toolspec's defaults
// fill in what is unset). It lives until Cancel, which the caller must
// call once the audio is taken or no longer wanted.
func (s *Speaker) Begin(ctx context.Context, settings toolspec.SpeechSettings) *Utterance {
	settings = withSpeechDefaults(settings)
	ctx, cancel := context.WithCancel(ctx)
	return &Utterance{
		t: s.t, ctx: ctx, cancel: cancel, slots: make(chan struct{}, speechParallel), finished: make(chan struct{}),
		max: settings.MaxChars,
		base: openai.CreateSpeechRequest{
			Model: openai.SpeechModel(settings.Model), Voice: openai.SpeechVoice(settings.Voice),
			ResponseFormat: openai.SpeechResponseFormat(settings.Format), Speed: settings.Speed,
		},
	}
}

// Write takes the text written so far and starts speaking each part of
// it that is complete. Text that does not extend what was written before
// is ignored until Finish.
func (u *Utterance) Write(text string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.done && strings.HasPrefix(text, u.cut) {
		u.startComplete(text)
	}
}

// startComplete starts a part for each complete part of text after what
// was cut (the caller holds u.mu).
func (u *Utterance) startComplete(text string) {
	for {
		n := cutPoint(text[len(u.cut):])
		if n == 0 {
			return
		}
		p := u.start(text[len(u.cut) : len(u.cut)+n])
		u.cut = text[:len(u.cut)+n]
		if p != nil {
			p.end = len(u.cut)
		}
	}
}

// Finish takes the whole text and starts speaking what is left of it.
// The parts the text goes on from are kept; if it parts from what Write
// cut (the model's final text differs from its stream, or its writer
// shortened it: a panel's length cap), the parts after that point are
// dropped, still counted as spoken once made, and the rest of the text is
// spoken anew: the audio holds the final text's words and no others.
func (u *Utterance) Finish(text string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.done {
		return
	}
	u.done = true
	defer close(u.finished)
	u.keepPartsOf(text)
	u.startComplete(text)
	u.start(text[len(u.cut):]) // the last sentence, now complete
	u.cut = text
}

// keepPartsOf drops the last parts until text goes on from the ones
// left, whitespace at their end aside (a text cut at a line break ends
// before it), and leaves u.cut at their end (the caller holds u.mu).
func (u *Utterance) keepPartsOf(text string) {
	for ; len(u.parts) > 0; u.parts = u.parts[:len(u.parts)-1] {
		kept := strings.TrimRightFunc(u.cut[:u.parts[len(u.parts)-1].end], unicode.IsSpace)
		if strings.HasPrefix(text, kept) {
			u.cut = kept
			return
		}
	}
	u.cut = ""
}

// start speaks piece as the next part, unless it has nothing to say:
// whitespace and punctuation alone (a cap's closing "…") are no speech
// call. Past the utterance's bound nothing more is spoken: the part that
// reaches it ends at the last sentence (else word) within it. The caller
// holds u.mu.
func (u *Utterance) start(piece string) *part {
	piece = strings.TrimSpace(piece)
	if u.full {
		return nil
	}
	if u.max > 0 {
		if cut := within(piece, u.max-u.asked); cut != piece {
			piece, u.full = cut, true // nothing after this part
		}
	}
	if strings.IndexFunc(piece, func(r rune) bool { return !unicode.IsPunct(r) && !unicode.IsSpace(r) }) < 0 {
		return nil
	}
	u.asked += utf8.RuneCountInString(piece)
	p := &part{text: piece, made: make(chan struct{})}
	u.parts = append(u.parts, p)
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer close(p.made)
		select {
		case u.slots <- struct{}{}:
			defer func() { <-u.slots }()
		case <-u.ctx.Done():
			p.err = u.ctx.Err()
			return
		}
		req := u.base
		req.Input = p.text
		p.clip, p.err = u.t.synthesise(u.ctx, req)
		if p.err == nil {
			chars := utf8.RuneCountInString(p.text)
			u.mu.Lock()
			u.spoken += chars
			u.mu.Unlock()
			u.t.cfg.Log.Debug("speech part made", zap.Int("characters", chars), zap.Int("bytes", len(p.clip)))
		}
	}()
	return p
}

// Audio waits for the text to be complete and every part made, and
// returns them joined into one file, or into several in order when one
// would pass limit bytes (joinNotes), with how many parts there were. The
// first part that failed fails it all: never a file with a hole.
func (u *Utterance) Audio(ctx context.Context, limit int) (notes [][]byte, parts int, err error) {
	select {
	case <-u.finished:
	case <-u.ctx.Done(): // cancelled before the text was complete
		return nil, 0, u.ctx.Err()
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	u.mu.Lock()
	list := u.parts
	u.mu.Unlock()
	clips := make([][]byte, len(list))
	for i, p := range list {
		select {
		case <-p.made:
		case <-ctx.Done():
			return nil, len(list), ctx.Err()
		}
		if p.err != nil {
			return nil, len(list), &speechFailure{part: i, parts: len(list), err: p.err}
		}
		clips[i] = p.clip
	}
	if len(clips) == 0 {
		return nil, 0, errors.New("mcp: nothing to speak")
	}
	notes, err = joinNotes(string(u.base.ResponseFormat), clips, limit)
	return notes, len(list), err
}

// Cancel stops the parts still in flight and waits for them; what was
// made stays counted (Spoken).
func (u *Utterance) Cancel() {
	u.mu.Lock()
	u.done = true
	u.mu.Unlock()
	u.cancel()
	u.wg.Wait()
}

// Spoken is how many characters OpenAI has spoken so far: what it bills.
func (u *Utterance) Spoken() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.spoken
}

// cutPoint is the length in bytes of the first complete part of text, 0
// when none is complete yet: text up to the first sentence end (with the
// space after it) once partChars characters are in, or the first line
// break once paragraphChars are, or the last space within MaxSpeechInput
// for a sentence longer than one speech call takes.
func cutPoint(text string) int {
	chars := 0
	for i, r := range text {
		chars++
		next := i + utf8.RuneLen(r)
		switch {
		case r == '\n' && chars >= paragraphChars:
			return next
		case chars >= partChars && strings.ContainsRune(".!?…。！？", r) && next < len(text) && startsWithSpace(text[next:]):
			return next
		case chars >= MaxSpeechInput:
			if space := strings.LastIndexFunc(text[:next], isSpace); space > 0 {
				return space + 1
			}
			return next
		}
	}
	return 0
}

func isSpace(r rune) bool { return r == ' ' || r == '\n' || r == '\t' }
