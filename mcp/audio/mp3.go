// Package audio reads, measures and joins the audio containers the tts tool
// receives from OpenAI: MP3 (MPEG audio Layer III frames) and Ogg Opus.
//
// Speech for a text longer than the API's input limit is synthesised in
// parts and joined here into one file: MP3 frames are self-contained, so the
// parts' frames are concatenated (dropping the tags and VBR info frames that
// would describe only one part); Ogg Opus parts are re-paginated into one
// logical stream (one header, continuous page numbers and granule positions).
package audio

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// ErrFormat is wrapped by every error about malformed input.
var ErrFormat = errors.New("audio: malformed data")

// MP3Info describes a parsed MP3 stream.
type MP3Info struct {
	Frames     int
	SampleRate int
	Duration   time.Duration
}

// Layer III bitrates in kbit/s by bitrate index: MPEG-1, then MPEG-2/2.5.
var (
	bitratesV1 = [15]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}
	bitratesV2 = [15]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}
)

// mp3Frame is one parsed Layer III frame header.
type mp3Frame struct {
	size, samples, sampleRate, sideInfo int
}

// parseFrameHeader decodes the 4-byte header at b.
func parseFrameHeader(b []byte) (mp3Frame, error) {
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return mp3Frame{}, fmt.Errorf("%w: no MPEG frame sync", ErrFormat)
	}
	version := b[1] >> 3 & 3 // 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
	layer := b[1] >> 1 & 3   // 1: Layer III
	if version == 1 || layer != 1 {
		return mp3Frame{}, fmt.Errorf("%w: not MPEG Layer III", ErrFormat)
	}
	brIndex, srIndex, padding := int(b[2]>>4), int(b[2]>>2&3), int(b[2]>>1&1)
	if brIndex == 0 || brIndex == 15 || srIndex == 3 {
		return mp3Frame{}, fmt.Errorf("%w: bad bitrate or sample rate index", ErrFormat)
	}
	mono := b[3]>>6 == 3
	rate := [3]int{44100, 48000, 32000}[srIndex]
	f := mp3Frame{samples: 1152, sideInfo: 32}
	bitrate := bitratesV1[brIndex] * 1000
	if mono {
		f.sideInfo = 17
	}
	switch version {
	case 3:
		f.size = 144*bitrate/rate + padding
	default:
		rate /= 2
		if version == 0 {
			rate /= 2
		}
		bitrate = bitratesV2[brIndex] * 1000
		f.samples, f.sideInfo = 576, 17
		if mono {
			f.sideInfo = 9
		}
		f.size = 72*bitrate/rate + padding
	}
	f.sampleRate = rate
	return f, nil
}

// mp3Span is the frame region of an MP3 file and its frames.
type mp3Span struct {
	start, end int // frames are b[start:end]; before: ID3v2, after: ID3v1
	frames     []int
	info       MP3Info
}

// id3v2Size is the length of the ID3v2 tag at the start of b, or 0.
func id3v2Size(b []byte) (int, error) {
	if len(b) < 10 || string(b[:3]) != "ID3" {
		return 0, nil
	}
	for _, c := range b[6:10] {
		if c&0x80 != 0 {
			return 0, fmt.Errorf("%w: bad ID3v2 size", ErrFormat)
		}
	}
	n := 10 + (int(b[6])<<21 | int(b[7])<<14 | int(b[8])<<7 | int(b[9]))
	if b[5]&0x10 != 0 { // footer present
		n += 10
	}
	if n > len(b) {
		return 0, fmt.Errorf("%w: truncated ID3v2 tag", ErrFormat)
	}
	return n, nil
}

func scanMP3(b []byte) (mp3Span, error) {
	start, err := id3v2Size(b)
	if err != nil {
		return mp3Span{}, err
	}
	end := len(b)
	if end-start >= 128 && string(b[end-128:end-125]) == "TAG" {
		end -= 128
	}
	s := mp3Span{start: start, end: end}
	var samples int64
	for off := start; off < end; {
		f, err := parseFrameHeader(b[off:end])
		if err != nil {
			return mp3Span{}, fmt.Errorf("frame %d at byte %d: %w", len(s.frames), off, err)
		}
		if off+f.size > end {
			return mp3Span{}, fmt.Errorf("%w: truncated frame %d at byte %d", ErrFormat, len(s.frames), off)
		}
		if s.info.SampleRate == 0 {
			s.info.SampleRate = f.sampleRate
		} else if s.info.SampleRate != f.sampleRate {
			return mp3Span{}, fmt.Errorf("%w: sample rate changes at frame %d", ErrFormat, len(s.frames))
		}
		s.frames = append(s.frames, off)
		samples += int64(f.samples)
		off += f.size
	}
	if len(s.frames) == 0 {
		return mp3Span{}, fmt.Errorf("%w: no MP3 frames", ErrFormat)
	}
	s.info.Frames = len(s.frames)
	s.info.Duration = time.Duration(samples * int64(time.Second) / int64(s.info.SampleRate))
	return s, nil
}

// ParseMP3 checks that b is an MP3 stream (optional ID3v2 tag, contiguous
// Layer III frames, optional ID3v1 tag) and describes it.
func ParseMP3(b []byte) (MP3Info, error) {
	s, err := scanMP3(b)
	return s.info, err
}

// MP3Duration is the playing time of the MP3 stream in b, counted frame by
// frame (so it is right for VBR streams too).
func MP3Duration(b []byte) (time.Duration, error) {
	info, err := ParseMP3(b)
	return info.Duration, err
}

// isVBRInfoFrame reports whether the frame at b carries a Xing/Info or VBRI
// header: an encoder's summary of one part, wrong for a joined stream.
func isVBRInfoFrame(b []byte) bool {
	f, err := parseFrameHeader(b)
	if err != nil || len(b) < f.size {
		return false
	}
	frame := b[:f.size]
	if x := 4 + f.sideInfo; len(frame) >= x+4 {
		if tag := string(frame[x : x+4]); tag == "Xing" || tag == "Info" {
			return true
		}
	}
	return len(frame) >= 40 && string(frame[36:40]) == "VBRI"
}

// JoinMP3 joins MP3 streams into one: the first part's ID3v2 tag, every
// part's audio frames, the last part's ID3v1 tag. VBR info frames are dropped
// when there is more than one part, since they state one part's length.
func JoinMP3(parts [][]byte) ([]byte, error) {
	if len(parts) == 0 {
		return nil, errors.New("audio: nothing to join")
	}
	if len(parts) == 1 {
		if _, err := scanMP3(parts[0]); err != nil {
			return nil, err
		}
		return parts[0], nil
	}
	var out bytes.Buffer
	rate := 0
	for i, p := range parts {
		s, err := scanMP3(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i+1, err)
		}
		if rate != 0 && s.info.SampleRate != rate {
			return nil, fmt.Errorf("%w: part %d has sample rate %d, not %d", ErrFormat, i+1, s.info.SampleRate, rate)
		}
		rate = s.info.SampleRate
		if i == 0 {
			out.Write(p[:s.start])
		}
		frames := p[s.start:s.end]
		if isVBRInfoFrame(frames) {
			second := s.end
			if len(s.frames) > 1 {
				second = s.frames[1]
			}
			frames = p[second:s.end]
		}
		out.Write(frames)
		if i == len(parts)-1 {
			out.Write(p[s.end:])
		}
	}
	return out.Bytes(), nil
}
