package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Ogg page header flags.
const (
	flagContinued = 1
	flagFirst     = 2
	flagLast      = 4
)

// oggCRCTable is the table of Ogg's CRC-32: polynomial 0x04C11DB7, not
// reflected, initial value 0, no final xor.
var oggCRCTable = func() (t [256]uint32) {
	for i := range t {
		r := uint32(i) << 24
		for range 8 {
			if r&0x80000000 != 0 {
				r = r<<1 ^ 0x04C11DB7
			} else {
				r <<= 1
			}
		}
		t[i] = r
	}
	return t
}()

func oggCRC(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc = crc<<8 ^ oggCRCTable[byte(crc>>24)^c]
	}
	return crc
}

// OpusStream is one logical Ogg Opus stream, as RFC 7845 lays it out.
type OpusStream struct {
	Head    []byte   // the OpusHead packet
	Tags    []byte   // the OpusTags packet
	Packets [][]byte // audio packets
	// Granule is the final granule position: samples at 48 kHz including
	// the pre-skip; less than the packets' total when the end is trimmed.
	Granule int64
}

// Channels and PreSkip read the OpusHead packet.
func (s *OpusStream) Channels() int  { return int(s.Head[9]) }
func (s *OpusStream) PreSkip() int64 { return int64(binary.LittleEndian.Uint16(s.Head[10:12])) }
func (s *OpusStream) Duration() time.Duration {
	n := max(s.Granule-s.PreSkip(), 0)
	return time.Duration(n * int64(time.Second) / 48000)
}

// NewOpusHead builds an OpusHead packet for mono or stereo (mapping family 0)
// with the given pre-skip, for an input rate of 48 kHz.
func NewOpusHead(channels int, preSkip uint16) []byte {
	h := []byte("OpusHead\x01")
	h = append(h, byte(channels))
	h = binary.LittleEndian.AppendUint16(h, preSkip)
	h = binary.LittleEndian.AppendUint32(h, 48000)
	h = binary.LittleEndian.AppendUint16(h, 0) // output gain
	return append(h, 0)                        // channel mapping family
}

// NewOpusTags builds an OpusTags packet with a vendor string and no comments.
func NewOpusTags(vendor string) []byte {
	t := []byte("OpusTags")
	t = binary.LittleEndian.AppendUint32(t, uint32(len(vendor)))
	t = append(t, vendor...)
	return binary.LittleEndian.AppendUint32(t, 0)
}

// OpusPacketSamples is the number of 48 kHz samples in an Opus packet,
// from its TOC byte (RFC 6716 section 3.1).
func OpusPacketSamples(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, fmt.Errorf("%w: empty Opus packet", ErrFormat)
	}
	config := int(p[0] >> 3)
	var frame int // samples per frame at 48 kHz
	switch {
	case config < 12: // SILK: 10, 20, 40, 60 ms
		frame = [4]int{480, 960, 1920, 2880}[config%4]
	case config < 16: // hybrid: 10, 20 ms
		frame = [2]int{480, 960}[config%2]
	default: // CELT: 2.5, 5, 10, 20 ms
		frame = [4]int{120, 240, 480, 960}[config%4]
	}
	switch p[0] & 3 {
	case 0:
		return frame, nil
	case 1, 2:
		return 2 * frame, nil
	}
	if len(p) < 2 {
		return 0, fmt.Errorf("%w: Opus packet without frame count", ErrFormat)
	}
	n := int(p[1] & 0x3F)
	if n == 0 || n*frame > 5760 {
		return 0, fmt.Errorf("%w: bad Opus frame count %d", ErrFormat, n)
	}
	return n * frame, nil
}

// ParseOggOpus reads a single-stream Ogg Opus file, checking page CRCs.
func ParseOggOpus(b []byte) (*OpusStream, error) {
	var (
		packets [][]byte
		partial []byte
		serial  uint32
		seq     uint32
		granule int64
		last    bool
	)
	for off, page := 0, 0; off < len(b); page++ {
		if last {
			return nil, fmt.Errorf("%w: data after the last Ogg page", ErrFormat)
		}
		h := b[off:]
		if len(h) < 27 || string(h[:4]) != "OggS" || h[4] != 0 {
			return nil, fmt.Errorf("%w: no Ogg page at byte %d", ErrFormat, off)
		}
		nseg := int(h[26])
		if len(h) < 27+nseg {
			return nil, fmt.Errorf("%w: truncated Ogg page %d", ErrFormat, page)
		}
		size := 27 + nseg
		for _, l := range h[27 : 27+nseg] {
			size += int(l)
		}
		if len(h) < size {
			return nil, fmt.Errorf("%w: truncated Ogg page %d", ErrFormat, page)
		}
		raw := bytes.Clone(h[:size])
		want := binary.LittleEndian.Uint32(raw[22:26])
		clear(raw[22:26])
		if oggCRC(raw) != want {
			return nil, fmt.Errorf("%w: Ogg page %d CRC mismatch", ErrFormat, page)
		}
		flags := h[5]
		pageSerial, pageSeq := binary.LittleEndian.Uint32(h[14:18]), binary.LittleEndian.Uint32(h[18:22])
		switch {
		case page == 0 && flags&flagFirst == 0:
			return nil, fmt.Errorf("%w: first Ogg page lacks the start flag", ErrFormat)
		case page == 0:
			serial = pageSerial
		case pageSerial != serial || flags&flagFirst != 0:
			return nil, fmt.Errorf("%w: more than one logical stream (page %d)", ErrFormat, page)
		case pageSeq != seq+1:
			return nil, fmt.Errorf("%w: Ogg page %d out of sequence", ErrFormat, page)
		}
		seq = pageSeq
		if g := int64(binary.LittleEndian.Uint64(h[6:14])); g != -1 {
			granule = g
		}
		last = flags&flagLast != 0
		if (flags&flagContinued != 0) != (partial != nil) {
			return nil, fmt.Errorf("%w: Ogg page %d continuation flag disagrees", ErrFormat, page)
		}
		data := h[27+nseg : size]
		for _, l := range h[27 : 27+nseg] {
			partial = append(partial, data[:l]...)
			data = data[l:]
			if l < 255 {
				packets = append(packets, partial)
				partial = nil
			}
		}
		off += size
	}
	if !last || partial != nil {
		return nil, fmt.Errorf("%w: Ogg stream is not finished", ErrFormat)
	}
	if len(packets) < 2 || len(packets[0]) < 19 || string(packets[0][:8]) != "OpusHead" || !bytes.HasPrefix(packets[1], []byte("OpusTags")) {
		return nil, fmt.Errorf("%w: not an Ogg Opus stream", ErrFormat)
	}
	s := &OpusStream{Head: packets[0], Tags: packets[1], Packets: packets[2:], Granule: granule}
	if c := s.Channels(); c < 1 || c > 2 || s.Head[18] != 0 {
		return nil, fmt.Errorf("%w: unsupported Opus channel layout", ErrFormat)
	}
	return s, nil
}

// OggOpusDuration is the playing time of the Ogg Opus file in b.
func OggOpusDuration(b []byte) (time.Duration, error) {
	s, err := ParseOggOpus(b)
	if err != nil {
		return 0, err
	}
	return s.Duration(), nil
}

// Encode writes s as an Ogg file with the given serial number: the headers
// on their own pages (as RFC 7845 requires), audio packets packed up to 255
// lacing values per page, granule positions counted from the packets' TOC
// bytes and the final page carrying s.Granule.
func (s *OpusStream) Encode(serial uint32) ([]byte, error) {
	var out []byte
	seq := uint32(0)
	page := func(flags byte, granule int64, packets [][]byte) {
		var lacing []byte
		var body []byte
		for _, p := range packets {
			n := len(p)
			for ; n >= 255; n -= 255 {
				lacing = append(lacing, 255)
			}
			lacing = append(lacing, byte(n))
			body = append(body, p...)
		}
		start := len(out)
		out = append(out, "OggS\x00"...)
		out = append(out, flags)
		out = binary.LittleEndian.AppendUint64(out, uint64(granule))
		out = binary.LittleEndian.AppendUint32(out, serial)
		out = binary.LittleEndian.AppendUint32(out, seq)
		out = append(out, 0, 0, 0, 0) // CRC, filled in below
		out = append(out, byte(len(lacing)))
		out = append(out, lacing...)
		out = append(out, body...)
		binary.LittleEndian.PutUint32(out[start+22:], oggCRC(out[start:]))
		seq++
	}
	page(flagFirst, 0, [][]byte{s.Head})
	if len(s.Packets) == 0 {
		page(flagLast, 0, [][]byte{s.Tags})
		return out, nil
	}
	page(0, 0, [][]byte{s.Tags})
	var (
		granule int64
		batch   [][]byte
		lacing  int
	)
	for i, p := range s.Packets {
		if len(p) > 255*254 {
			return nil, fmt.Errorf("%w: Opus packet %d too large", ErrFormat, i)
		}
		n, err := OpusPacketSamples(p)
		if err != nil {
			return nil, fmt.Errorf("packet %d: %w", i, err)
		}
		need := len(p)/255 + 1
		if lacing+need > 255 {
			page(0, granule, batch)
			batch, lacing = nil, 0
		}
		batch = append(batch, p)
		lacing += need
		granule += int64(n)
	}
	page(flagLast, min(s.Granule, granule), batch)
	return out, nil
}

// JoinOggOpus joins Ogg Opus files into one logical stream: the first
// part's headers, all parts' audio packets in order, the last part's end
// trimming. Later parts' pre-skip samples (a few ms of decoder warm-up) play
// as part of the stream; this is inaudible next to the pause between
// sentences where parts are cut.
func JoinOggOpus(parts [][]byte) ([]byte, error) {
	if len(parts) == 0 {
		return nil, errors.New("audio: nothing to join")
	}
	var (
		joined  *OpusStream
		serial  uint32
		samples int64
	)
	for i, p := range parts {
		s, err := ParseOggOpus(p)
		if err != nil {
			return nil, fmt.Errorf("part %d: %w", i+1, err)
		}
		var partSamples int64
		for _, pk := range s.Packets {
			n, err := OpusPacketSamples(pk)
			if err != nil {
				return nil, fmt.Errorf("part %d: %w", i+1, err)
			}
			partSamples += int64(n)
		}
		if joined == nil {
			joined = &OpusStream{Head: s.Head, Tags: s.Tags}
			serial = binary.LittleEndian.Uint32(p[14:18])
		} else if s.Channels() != joined.Channels() {
			return nil, fmt.Errorf("%w: part %d has %d channels, not %d", ErrFormat, i+1, s.Channels(), joined.Channels())
		}
		joined.Packets = append(joined.Packets, s.Packets...)
		// Granule of the joined stream: all earlier samples plus this
		// part's own final granule (which trims its end).
		joined.Granule = samples + s.Granule
		samples += partSamples
	}
	return joined.Encode(serial)
}
