package busarchive

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server/archive"
)

// headEntry is where state.json lies in an archive's decoded first bytes.
type headEntry struct {
	ts        int64
	json, end int // its JSON is plain[json:end]
}

// parseStateEntry finds state.json at the start of plain, the archive's
// first decoded bytes, as the archive reader reads it: nil when plain ends
// before it does.
func parseStateEntry(plain []byte) (*headEntry, error) {
	magic := len(archive.MagicBytes)
	if len(plain) < magic {
		if !bytes.HasPrefix([]byte(archive.MagicBytes), plain) {
			return nil, errors.New("it is not a NATSARC1 archive")
		}
		return nil, nil
	}
	if string(plain[:magic]) != archive.MagicBytes {
		return nil, errors.New("it is not a NATSARC1 archive")
	}
	p := plain[magic:]
	var f [5]uint64 // name length, timestamp, sequence, header size, payload size
	for i := range f {
		var n int
		if i == 1 {
			var v int64
			v, n = binary.Varint(p)
			f[i] = uint64(v)
		} else {
			f[i], n = binary.Uvarint(p)
		}
		if n == 0 {
			return nil, nil
		}
		if n < 0 {
			return nil, errors.New("its first entry's header overflows")
		}
		p = p[n:]
	}
	const name = "state.json"
	if f[0] != uint64(len(name)) {
		return nil, errors.New("it does not begin with state.json")
	}
	if f[3] > maxStateEntry || f[4] > maxStateEntry || f[3]+f[4] > maxStateEntry {
		return nil, fmt.Errorf("its state.json is over the bound of %d bytes", maxStateEntry)
	}
	if len(p) < len(name) {
		return nil, nil
	}
	if string(p[:len(name)]) != name {
		return nil, errors.New("it does not begin with state.json")
	}
	start := len(plain) - len(p) + len(name)
	end := start + int(f[3]+f[4])
	if end > len(plain) {
		return nil, nil
	}
	return &headEntry{ts: int64(f[1]), json: start, end: end}, nil
}

// setHeadSeqs is state.json (js) with last_seq set to last and, unless
// first is 0, first_seq set to first; every other field as it was, in its
// place. Keys match as Go's JSON decoder (the server's) matches them,
// without regard to case; a field absent is added.
func setHeadSeqs(js []byte, last, first uint64) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("state.json is not a JSON object")
	}
	out := []byte{'{'}
	field := func(key string, v []byte) {
		if len(out) > 1 {
			out = append(out, ',')
		}
		k, _ := json.Marshal(key)
		out = append(append(append(out, k...), ':'), v...)
	}
	var sawLast, sawFirst bool
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil, errors.New("state.json is not a JSON object")
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("state.json: %w", err)
		}
		switch {
		case strings.EqualFold(key, "last_seq"):
			v, sawLast = strconv.AppendUint(nil, last, 10), true
		case first != 0 && strings.EqualFold(key, "first_seq"):
			v, sawFirst = strconv.AppendUint(nil, first, 10), true
		}
		field(key, v)
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, errors.New("state.json is not a JSON object")
	}
	if !sawFirst && first != 0 {
		field("first_seq", strconv.AppendUint(nil, first, 10))
	}
	if !sawLast {
		field("last_seq", strconv.AppendUint(nil, last, 10))
	}
	return append(out, '}'), nil
}

// chunkPass passes an s2 stream's chunks through byte for byte, but for
// the index chunk, which it drops. It reads chunk headers only; the bodies
// are copied as they come.
type chunkPass struct {
	src  io.Reader
	hdr  [4]byte
	nhdr int // header bytes still to give out, from hdr[4-nhdr:]
	body int // body bytes of the current chunk still to give out
	err  error
}

func (c *chunkPass) Read(p []byte) (int, error) {
	for c.nhdr == 0 && c.body == 0 && c.err == nil {
		c.err = c.nextChunk()
	}
	if c.nhdr > 0 {
		n := copy(p, c.hdr[4-c.nhdr:])
		c.nhdr -= n
		return n, nil
	}
	if c.body == 0 {
		return 0, c.err
	}
	n, err := c.src.Read(p[:min(len(p), c.body)])
	c.body -= n
	if errors.Is(err, io.EOF) && c.body > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && !errors.Is(err, io.EOF) {
		c.err = err
	}
	return n, c.passErr(err)
}

// passErr is the error a body read returns: none for io.EOF at a chunk's
// end (the next header read tells).
func (c *chunkPass) passErr(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// nextChunk reads the next chunk's header, skipping index chunks whole.
func (c *chunkPass) nextChunk() error {
	if _, err := io.ReadFull(c.src, c.hdr[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("the stream archive ends inside an s2 chunk header: %w", err)
		}
		return err // io.EOF: the archive ends here
	}
	n := int(c.hdr[1]) | int(c.hdr[2])<<8 | int(c.hdr[3])<<16
	if c.hdr[0] == chunkIndex {
		if _, err := io.CopyN(io.Discard, c.src, int64(n)); err != nil {
			return fmt.Errorf("the stream archive ends inside its s2 index: %w", noEOF(err))
		}
		return nil
	}
	c.nhdr, c.body = 4, n
	return nil
}
