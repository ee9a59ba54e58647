package keeper

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A restore journal is a small head, journal.<module>.<local>, and a body
// that may be large: the positions the restore sets back on streams the
// point does not carry (Reposition) and what each consumer must be once it
// is done (Expect), both one entry per consumer. The body lies in the index
// beside the head, cut into parts of at most journalPartSize bytes:
//
//	journal-part.<module>.<local>.<sum>.<n>   n = 0 … count-1
//
// where sum is the first 16 hex digits of the body's SHA-256. The head
// names the parts (count, bytes, the whole SHA-256) under "reposition",
// where older heads held the positions themselves. The body is fixed once
// the journal is first saved, so it is written once:
//
//   - the parts are written before the head that names them, so a head in
//     the index always names parts that are there; a keeper that stops
//     between the two leaves parts that no head names;
//   - a journal is closed head first, then its parts, so a keeper that
//     stops between the two leaves parts that no head names too;
//   - Recover removes parts that no head names (sweepJournalParts), under
//     the kept data's lease, so never those of a restore being journaled.
//
// Keys under journal-part. are under none of the prefixes that anything
// else in the keeper lists (journal., point., aside., plan., policy.,
// lease.), so the index listing, rebuild, list-kept, prune and owners never
// see them.
const (
	journalPartPrefix = "journal-part."
	// journalPartSize bounds one part: well under the index's max value
	// (1 MiB) and the bus's max payload, so one part is one small message.
	journalPartSize = 256 << 10
	// maxJournalParts bounds a body: 32 MiB, several times what the
	// positions of the biggest point (point.json is at most maxRecordSize)
	// and their expected figures take.
	maxJournalParts = 128
	// maxJournalHead bounds the head. It holds no list of consumers, only
	// the streams (at most a plan's MaxPlanStreams, or the point's), their
	// evidence, and the request's caller and why: a few KiB.
	maxJournalHead = 512 << 10
)

// bodyRef is what a head says of its body: how many parts, how many bytes
// in all, and their SHA-256.
type bodyRef struct {
	Parts  int    `json:"parts"`
	Bytes  int    `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// journalBody is the body of a journal, as its parts hold it.
type journalBody struct {
	Reposition []Position        `json:"reposition"`
	Expect     []ConsumerFigures `json:"expect"`
}

// gen is the token that names the body's parts.
func (r *bodyRef) gen() string { return r.SHA256[:16] }

// check refuses a reference that does not hold together (a head is read
// from the index: outside input).
func (r *bodyRef) check() error {
	switch {
	case r.Parts < 1 || r.Parts > maxJournalParts:
		return fmt.Errorf("it names %d parts of its body, not 1 to %d", r.Parts, maxJournalParts)
	case r.Bytes <= (r.Parts-1)*journalPartSize || r.Bytes > r.Parts*journalPartSize:
		return fmt.Errorf("it names a body of %d bytes in %d parts of at most %d", r.Bytes, r.Parts, journalPartSize)
	case len(r.SHA256) != 64 || strings.Trim(r.SHA256, "0123456789abcdef") != "":
		return fmt.Errorf("it names the body's SHA-256 as %.80q, not 64 hex digits", r.SHA256)
	}
	return nil
}

func journalPartKey(module, local, gen string, n int) string {
	return journalPartPrefix + module + "." + local + "." + gen + "." + strconv.Itoa(n)
}

// journalShape is journal without its encoding, for the head's.
type journalShape journal

// decodeJournal reads a head into j: of this shape, whose "reposition"
// names the parts of its body (which loadBody then reads), or of the older
// one, which holds the positions and the expected figures itself.
//
// A head of a format above JournalFormat is refused with a *FormatError
// before anything else of it is read.
func decodeJournal(data []byte, j *journal) error {
	*j = journal{}
	if err := checkFormat("a restore journal in the index", data, JournalFormatDelta); err != nil {
		return err
	}
	var h struct {
		*journalShape
		Reposition json.RawMessage   `json:"reposition"`
		Expect     []ConsumerFigures `json:"expect"`
	}
	h.journalShape = (*journalShape)(j)
	if err := json.Unmarshal(data, &h); err != nil {
		return err
	}
	raw := bytes.TrimSpace(h.Reposition)
	if len(raw) > 0 && raw[0] == '{' {
		var ref bodyRef
		if err := json.Unmarshal(raw, &ref); err != nil {
			return fmt.Errorf("its reference to its body does not decode: %w", err)
		}
		if err := ref.check(); err != nil {
			return err
		}
		j.body, j.bodyAway = &ref, true
		return nil
	}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &j.Reposition); err != nil {
			return fmt.Errorf("its positions do not decode: %w", err)
		}
	}
	j.Expect = h.Expect
	return nil
}

// splitBody encodes j's body and cuts it into parts.
func splitBody(j *journal) (*bodyRef, [][]byte, error) {
	data, err := kept.MarshalOldKeys(journalBody{Reposition: j.Reposition, Expect: j.Expect}) // as before the new keys (encodeHead)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxJournalParts*journalPartSize {
		return nil, nil, fmt.Errorf("the restore journal's %d consumer position(s) and %d expected consumer(s) take %d bytes, over the %d a journal may hold",
			len(j.Reposition), len(j.Expect), len(data), maxJournalParts*journalPartSize)
	}
	sum := sha256.Sum256(data)
	ref := &bodyRef{Bytes: len(data), SHA256: hex.EncodeToString(sum[:])}
	var parts [][]byte
	for len(data) > 0 {
		n := min(len(data), journalPartSize)
		parts, data = append(parts, data[:n]), data[n:]
	}
	ref.Parts = len(parts)
	return ref, parts, nil
}

// saveBody writes j's body into the index as parts, before the head that
// names them, when j has a body that is not there yet: the body is fixed
// once a journal is first saved. An older journal, whose head held its
// body, gets parts the first time it is saved again.
func (js journalStore) saveBody(ctx context.Context, j *journal) error {
	if j.body != nil || j.bodyAway || len(j.Reposition)+len(j.Expect) == 0 {
		return nil
	}
	ref, parts, err := splitBody(j)
	if err != nil {
		return err
	}
	for n, p := range parts {
		if err := js.index.Put(ctx, journalPartKey(j.Module, j.Local, ref.gen(), n), p); err != nil {
			// Not removed here: a part a head names must never go, and the
			// parts named by no head are Recover's to remove.
			return fmt.Errorf("recording part %d of %d of the restore journal in the index: %w", n+1, len(parts), err)
		}
	}
	js.step("journal-parts-written")
	j.body = ref
	return nil
}

// loadBody reads the body that j's head names from its parts, whole and
// matching its SHA-256. A journal whose head held its body has it already.
func (js journalStore) loadBody(ctx context.Context, j *journal) error {
	if !j.bodyAway {
		return nil
	}
	ref := j.body
	data := make([]byte, 0, ref.Bytes)
	for n := range ref.Parts {
		p, err := js.index.Get(ctx, journalPartKey(j.Module, j.Local, ref.gen(), n))
		if err != nil {
			return fmt.Errorf("reading part %d of %d of its body: %w", n+1, ref.Parts, err)
		}
		if len(data)+len(p) > ref.Bytes {
			return fmt.Errorf("its body's parts hold more than the %d bytes its head names", ref.Bytes)
		}
		data = append(data, p...)
	}
	if sum := sha256.Sum256(data); len(data) != ref.Bytes || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return fmt.Errorf("its body's parts hold %d bytes whose SHA-256 is not the one its head names (%d bytes, %s)", len(data), ref.Bytes, ref.SHA256)
	}
	var b journalBody
	if err := json.Unmarshal(data, &b); err != nil {
		return fmt.Errorf("its body does not decode: %w", err)
	}
	j.Reposition, j.Expect, j.bodyAway = b.Reposition, b.Expect, false
	return nil
}

// removeBody removes the parts of j's body, once its head is gone.
func (js journalStore) removeBody(ctx context.Context, j *journal) {
	if j.body == nil {
		return
	}
	for n := range j.body.Parts {
		if err := js.index.Delete(ctx, journalPartKey(j.Module, j.Local, j.body.gen(), n)); err != nil {
			js.log.Warn("could not remove a part of a closed restore journal from the index; recovery removes it", "module", j.Module, "local", j.Local, "part", n, "err", err)
			return
		}
	}
}

// sweepJournalParts removes the parts of journal bodies that no head names:
// those a keeper left when it stopped after writing a body and before its
// head, or after closing a head and before its parts. It looks under the
// kept data's lease, so never while a restore of it writes its journal; a
// kept data that a verb holds is left for the next sweep. It returns how
// many parts it removed.
func (k *Keeper) sweepJournalParts(ctx context.Context) (int, error) {
	keys, err := k.index.Keys(ctx, journalPartPrefix)
	if err != nil {
		return 0, fmt.Errorf("listing the parts of restore journals in the index: %w", err)
	}
	type kept struct{ module, local string }
	byKept := map[kept][]string{}
	var order []kept
	for _, key := range keys {
		f := strings.Split(strings.TrimPrefix(key, journalPartPrefix), ".")
		if len(f) != 4 {
			continue // not of the shape this keeper writes: left alone
		}
		kd := kept{f[0], f[1]}
		if _, ok := byKept[kd]; !ok {
			order = append(order, kd)
		}
		byKept[kd] = append(byKept[kd], key)
	}
	removed := 0
	var errs []error
	for _, kd := range order {
		orphans := func(ctx context.Context) ([]string, error) {
			j, err := k.readJournal(ctx, kd.module, kd.local)
			if err != nil {
				return nil, err // an unreadable head: its parts are left alone
			}
			var out []string
			for _, key := range byKept[kd] {
				gen := strings.Split(strings.TrimPrefix(key, journalPartPrefix), ".")[2]
				if j == nil || j.body == nil || j.body.gen() != gen {
					out = append(out, key)
				}
			}
			return out, nil
		}
		if o, err := orphans(ctx); err != nil || len(o) == 0 {
			continue
		}
		r := Request{Module: kd.module, Local: kd.local, Caller: "recovery"}
		lctx, release, err := k.lock(ctx, VerbRestore, r)
		if errors.Is(err, ErrBusy) {
			continue // a verb holds it: the next sweep looks again
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing the left-over parts of restore journals of %s/%s: %w", kd.module, kd.local, err))
			continue
		}
		o, err := orphans(lctx) // again, under the lease
		if err == nil {
			for _, key := range o {
				if err := k.index.Delete(lctx, key); err != nil {
					errs = append(errs, fmt.Errorf("removing left-over restore journal part %s from the index: %w", key, err))
					break
				}
				removed++
			}
		}
		release()
	}
	if removed > 0 {
		k.log.Info("removed the parts of restore journals that no journal names", "parts", removed)
	}
	return removed, errors.Join(errs...)
}
