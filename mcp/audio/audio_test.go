package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"
)

// silentFrame is an MPEG-1 Layer III frame, 32 kbit/s, 48 kHz, mono, no
// padding: 96 bytes, 1152 samples (24 ms), all-zero side info and data,
// which decodes to silence.
func silentFrame() []byte {
	f := make([]byte, 96)
	copy(f, []byte{0xFF, 0xFB, 0x14, 0xC0})
	return f
}

func frames(n int) []byte { return bytes.Repeat(silentFrame(), n) }

func id3v2(body int) []byte {
	tag := []byte{'I', 'D', '3', 4, 0, 0, 0, 0, byte(body >> 7), byte(body & 0x7F)}
	return append(tag, make([]byte, body)...)
}

func id3v1() []byte {
	tag := make([]byte, 128)
	copy(tag, "TAG")
	return tag
}

// xingFrame is a silent frame announcing a (wrong, for a join) frame count.
func xingFrame() []byte {
	f := silentFrame()
	copy(f[4+17:], "Xing")
	return f
}

func TestParseMP3(t *testing.T) {
	tests := []struct {
		name   string
		in     []byte
		frames int
	}{
		{"bare frames", frames(125), 125},
		{"with tags", append(append(id3v2(200), frames(10)...), id3v1()...), 10},
		{"MPEG-2 frame", func() []byte { // 24 kHz, 8 kbit/s: 72*8000/24000 = 24 bytes
			f := make([]byte, 24)
			copy(f, []byte{0xFF, 0xF3, 0x14, 0xC0})
			return f
		}(), 1},
	}
	for _, tt := range tests {
		info, err := ParseMP3(tt.in)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if info.Frames != tt.frames {
			t.Errorf("%s: %d frames, want %d", tt.name, info.Frames, tt.frames)
		}
	}
	d, err := MP3Duration(frames(125))
	if err != nil || d != 3*time.Second {
		t.Errorf("MP3Duration(125 frames) = %v, %v; want 3s", d, err)
	}
	for name, bad := range map[string][]byte{
		"empty":      nil,
		"text":       []byte("not audio at all"),
		"truncated":  frames(3)[:250],
		"garbage":    append(frames(2), 1, 2, 3, 4),
		"layer II":   {0xFF, 0xFD, 0x14, 0xC0},
		"bad ID3":    {'I', 'D', '3', 4, 0, 0, 0x80, 0, 0, 0},
		"only a tag": id3v2(5),
	} {
		if _, err := ParseMP3(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("ParseMP3(%s) error = %v, want ErrFormat", name, err)
		}
	}
}

func TestJoinMP3(t *testing.T) {
	first := append(append(id3v2(20), xingFrame()...), frames(50)...)
	second := append(append(append(id3v2(30), xingFrame()...), frames(25)...), id3v1()...)
	third := frames(25)
	joined, err := JoinMP3([][]byte{first, second, third})
	if err != nil {
		t.Fatal(err)
	}
	info, err := ParseMP3(joined)
	if err != nil {
		t.Fatal(err)
	}
	if info.Frames != 100 {
		t.Errorf("joined %d frames, want 100 (info frames dropped)", info.Frames)
	}
	if !bytes.HasPrefix(joined, id3v2(20)) {
		t.Error("first part's ID3v2 tag not kept at the start")
	}
	if bytes.Count(joined, []byte("ID3")) != 1 || bytes.Contains(joined, []byte("TAG")) || bytes.Contains(joined, []byte("Xing")) {
		t.Error("tags or info frames of single parts left inside the joined stream")
	}
	if one, err := JoinMP3([][]byte{first}); err != nil || !bytes.Equal(one, first) {
		t.Errorf("JoinMP3 of one part changed it (%v)", err)
	}
	if _, err := JoinMP3([][]byte{first, []byte("junk")}); !errors.Is(err, ErrFormat) {
		t.Errorf("JoinMP3 with junk: %v", err)
	}
}

// bitwiseOggCRC is the Ogg checksum computed bit by bit, straight from its
// definition, as an oracle for the table version.
func bitwiseOggCRC(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04C11DB7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

func TestOggCRC(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("OggS"), []byte("123456789"), bytes.Repeat([]byte{0xA5, 0x00, 0xFF}, 1000)} {
		if got, want := oggCRC(in), bitwiseOggCRC(in); got != want {
			t.Errorf("oggCRC(%.10q) = %08x, want %08x", in, got, want)
		}
	}
	if oggCRCTable[1] != 0x04C11DB7 {
		t.Errorf("table[1] = %08x", oggCRCTable[1])
	}
}

// silence is the 20 ms CELT silence packet (TOC 0xF8: config 31, mono, one frame).
var silence = []byte{0xF8, 0xFF, 0xFE}

func opusFile(t *testing.T, packets int, trim int64, serial uint32) []byte {
	t.Helper()
	s := &OpusStream{Head: NewOpusHead(1, 312), Tags: NewOpusTags("test")}
	for range packets {
		s.Packets = append(s.Packets, silence)
	}
	s.Granule = int64(packets)*960 - trim
	b, err := s.Encode(serial)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOggOpusRoundTrip(t *testing.T) {
	b := opusFile(t, 500, 100, 7) // 10 s of packets, more than one page
	if string(b[:4]) != "OggS" || !bytes.Contains(b[:64], []byte("OpusHead")) {
		t.Fatal("no Ogg Opus magic")
	}
	s, err := ParseOggOpus(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Packets) != 500 || s.Channels() != 1 || s.PreSkip() != 312 {
		t.Errorf("parsed %d packets, %d channels, pre-skip %d", len(s.Packets), s.Channels(), s.PreSkip())
	}
	want := time.Duration(500*960-100-312) * time.Second / 48000
	if d, err := OggOpusDuration(b); err != nil || d != want {
		t.Errorf("duration %v, %v; want %v", d, err, want)
	}

	corrupt := bytes.Clone(b)
	corrupt[len(corrupt)-1] ^= 1
	if _, err := ParseOggOpus(corrupt); !errors.Is(err, ErrFormat) {
		t.Errorf("corrupted page accepted: %v", err)
	}
	if _, err := ParseOggOpus(b[:len(b)-10]); !errors.Is(err, ErrFormat) {
		t.Errorf("truncated stream accepted: %v", err)
	}
	if _, err := ParseOggOpus(append(bytes.Clone(b), b...)); !errors.Is(err, ErrFormat) {
		t.Errorf("chained stream accepted: %v", err)
	}
}

func TestOggLargePacketsSpanLacing(t *testing.T) {
	big := append([]byte{0xF8}, make([]byte, 254)...) // exactly 255 bytes: lacing 255, 0
	bigger := append([]byte{0xF8}, make([]byte, 700)...)
	s := &OpusStream{Head: NewOpusHead(2, 0), Tags: NewOpusTags("x"), Packets: [][]byte{big, bigger, silence}, Granule: 3 * 960}
	b, err := s.Encode(1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseOggOpus(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range s.Packets {
		if !bytes.Equal(got.Packets[i], p) {
			t.Errorf("packet %d differs after the round trip", i)
		}
	}
}

func TestJoinOggOpus(t *testing.T) {
	a, b := opusFile(t, 300, 0, 1), opusFile(t, 200, 50, 2)
	joined, err := JoinOggOpus([][]byte{a, b})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseOggOpus(joined)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Packets) != 500 {
		t.Errorf("%d packets, want 500", len(s.Packets))
	}
	if want := int64(500*960 - 50); s.Granule != want {
		t.Errorf("final granule %d, want %d", s.Granule, want)
	}
	if serial := binary.LittleEndian.Uint32(joined[14:18]); serial != 1 {
		t.Errorf("serial %d, want the first part's", serial)
	}
	stereo, err := (&OpusStream{Head: NewOpusHead(2, 312), Tags: NewOpusTags("x"), Packets: [][]byte{silence}, Granule: 960}).Encode(3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := JoinOggOpus([][]byte{a, stereo}); !errors.Is(err, ErrFormat) {
		t.Errorf("joining mono and stereo: %v", err)
	}
}

func TestOpusPacketSamples(t *testing.T) {
	for _, tt := range []struct {
		p    []byte
		want int
	}{
		{[]byte{0xF8}, 960},        // CELT 20 ms
		{[]byte{0x80}, 120},        // CELT 2.5 ms
		{[]byte{0x18}, 2880},       // SILK 60 ms
		{[]byte{0x69}, 1920},       // hybrid 20 ms, two frames
		{[]byte{0xFB, 0x03}, 2880}, // CELT 20 ms, code 3, three frames
	} {
		if got, err := OpusPacketSamples(tt.p); err != nil || got != tt.want {
			t.Errorf("OpusPacketSamples(%x) = %d, %v; want %d", tt.p, got, err, tt.want)
		}
	}
	for _, bad := range [][]byte{nil, {0xFB}, {0xFB, 0x00}, {0xFB, 0x3F}} {
		if _, err := OpusPacketSamples(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("OpusPacketSamples(%x) error = %v", bad, err)
		}
	}
}
