package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper/layout"
	"github.com/nats-keeper/nats-keeper/kept"
)

// Capture (changes.md): a keeper follows a kept data's streams and writes
// what they gain, in order, to the store as segments, each a small archive
// of its own (bus.tar, streams/<s>/stream.arc.s2 holding a contiguous
// sequence range of each stream that gained messages) and its record
// (segment.json, the commit mark, written last) with the deletes seen
// since the segment before, each stream's first sequence, and a sample of
// the module's consumer positions. A chain is a base (a full point taken
// when the chain began) and its segments, numbered from 1 with no gap:
//
//	capture/<module>/<local>/f<form>-<base fingerprint>/s<n, 12 digits>/bus.tar
//	capture/<module>/<local>/f<form>-<base fingerprint>/s<n, 12 digits>/segment.json
//
// Whether a kept data is captured, and how, is capture.<module>.<local> in
// the index (kept.CaptureRecord); the keeper that holds its capture lease
// (lease-capture.<module>.<local>) captures it, so another keeper takes it
// up when it dies, from the last committed segment.

// VerbCapture is capture-kept.
const VerbCapture = kept.VerbCapture

// Kinds of the capture's records.
type (
	CaptureRecord   = kept.CaptureRecord
	CaptureSettings = kept.CaptureSettings
	CaptureInfo     = kept.CaptureInfo
)

const (
	captureDir  = "capture"
	segmentFile = "segment.json"
	// baseFingerprintPrefix begins the fingerprint of a chain's base.
	baseFingerprintPrefix = "capture-"
	// momentFingerprintPrefix begins the fingerprint of a point made by a
	// restore to a moment.
	momentFingerprintPrefix = "at-"
)

func captureKey(module, local string) string { return "capture." + module + "." + local }

func captureLeaseKey(module, local string) string { return "lease-capture." + module + "." + local }

// chainRel is the store prefix of the chain whose base is the point
// f<form>-<fingerprint> of module/local.
func chainRel(module, local string, form int, fingerprint string) string {
	return path.Join(captureDir, module, local, fmt.Sprintf("f%d-%s", form, fingerprint))
}

// segmentRel is the prefix of segment n of the chain at chain.
func segmentRel(chain string, n uint64) string { return fmt.Sprintf("%s/s%012d", chain, n) }

// ErrCaptureHeld is RunCapture's answer when another keeper captures the
// kept data.
var ErrCaptureHeld = errors.New("another keeper captures this kept data")

// CaptureKept turns the capture of one kept data on or off, recording it in
// the index, where every keeper of the bus reads it.
func (k *Keeper) CaptureKept(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbCapture, r); err != nil {
		return nil, err
	}
	on := r.Capture == "on"
	rec := CaptureRecord{Module: r.Module, Local: r.Local, On: on, Form: r.Form, Since: k.now().UTC(), Caller: r.Caller, Why: r.Why}
	if r.Settings != nil {
		rec.Settings = *r.Settings
	}
	rec.Settings = rec.Settings.WithDefaults()
	if on {
		live, looked, err := k.liveStreams(ctx, r.Module, r.Local)
		if err != nil {
			return nil, fmt.Errorf("%s refused: %w, so capture was not turned on", VerbCapture, err)
		}
		if len(live) == 0 {
			return nil, Errorf(ErrNotFound, "%s refused: no kept data %s/%s on the bus (looked for %s), so capture was not turned on",
				VerbCapture, r.Module, r.Local, strings.Join(looked, ", "))
		}
	} else if was, err := k.captureRecord(ctx, r.Module, r.Local); err == nil {
		rec.Settings, rec.Form = was.Settings, was.Form
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := k.index.Put(ctx, captureKey(r.Module, r.Local), data); err != nil {
		return nil, Errorf(ErrFailed, "%s of %s/%s: the index did not take the setting (%v), so capture was not turned %s", VerbCapture, r.Module, r.Local, err, r.Capture)
	}
	said := fmt.Sprintf("Capture of %s/%s is on: a segment every %s or %s, a new base every %s, a window of %s; the keeper that holds its capture lease writes them.",
		r.Module, r.Local, rec.Settings.SegmentEvery, HumanBytes(rec.Settings.SegmentBytes), rec.Settings.BaseEvery, rec.Settings.Window)
	if !on {
		said = fmt.Sprintf("Capture of %s/%s is off: no segment is written from now on; the segments and bases kept stay until their window passes.", r.Module, r.Local)
	}
	info, err := k.captureInfo(ctx, rec)
	if err != nil {
		k.log.Warn("the capture's store could not be read for the reply", "kept", r.Module+"/"+r.Local, "err", err)
	}
	rep := &Reply{Said: said, Capture: info}
	k.record(ctx, Act{Verb: VerbCapture, Module: r.Module, Local: r.Local, Caller: r.Caller, BusIdentity: r.BusIdentity, Why: r.Why,
		What: said, Outcome: "done"})
	return rep, nil
}

// captureRecord reads capture.<module>.<local>, or an error wrapping
// ErrNotFound.
func (k *Keeper) captureRecord(ctx context.Context, module, local string) (*CaptureRecord, error) {
	data, err := k.index.Get(ctx, captureKey(module, local))
	if err != nil {
		return nil, err
	}
	var rec CaptureRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("the capture record of %s/%s does not decode: %w", module, local, err)
	}
	rec.Settings = rec.Settings.WithDefaults()
	return &rec, nil
}

// Captures lists the capture records of the bus (module and local, when
// set, narrow it), sorted by key.
func (k *Keeper) Captures(ctx context.Context, module, local string) ([]CaptureRecord, error) {
	keys, err := k.index.Keys(ctx, scopePrefix("capture", module, local))
	if err != nil {
		return nil, err
	}
	var out []CaptureRecord
	for _, key := range keys {
		parts := strings.Split(key, ".")
		if len(parts) != 3 || (local != "" && parts[2] != local) {
			continue
		}
		rec, err := k.captureRecord(ctx, parts[1], parts[2])
		if err != nil {
			if !errors.Is(err, ErrNotFound) {
				k.log.Warn("a capture record is left out", "key", key, "err", err)
			}
			continue
		}
		out = append(out, *rec)
	}
	return out, nil
}

// captureInfo is what the store holds of rec's kept data's capture.
func (k *Keeper) captureInfo(ctx context.Context, rec CaptureRecord) (*CaptureInfo, error) {
	info := &CaptureInfo{Module: rec.Module, Local: rec.Local, On: rec.On, Settings: rec.Settings}
	chains, err := k.listChains(ctx, rec.Module, rec.Local)
	if err != nil {
		return info, err
	}
	for _, c := range chains {
		info.Bases++
		info.Segments += len(c.listed)
		info.Bytes += c.listedBytes
		if info.From == nil {
			t := c.baseTaken
			info.From = &t
		}
	}
	if len(chains) > 0 {
		if err := k.readReach(ctx, chains[len(chains)-1]); err != nil {
			return info, err
		}
		t := k.windowEnd(ctx, rec.Module, rec.Local, chains)
		info.To = &t
	}
	if info.To != nil && rec.On {
		info.LagMS = max(0, k.now().Sub(*info.To).Milliseconds())
	}
	return info, nil
}

// listCaptures adds to a list-kept reply the captures of what it lists.
func (k *Keeper) listCaptures(ctx context.Context, r Request, rep *Reply) {
	recs, err := k.Captures(ctx, r.Module, r.Local)
	if err != nil {
		k.log.Warn("the capture records could not be read for the listing", "err", err)
		return
	}
	for _, rec := range recs {
		info, err := k.captureInfo(ctx, rec)
		if err != nil {
			k.log.Warn("a capture's store could not be read for the listing", "kept", rec.Module+"/"+rec.Local, "err", err)
		}
		rep.Captures = append(rep.Captures, *info)
	}
}

// stamp is t as a plain name's part.
func stamp(t time.Time) string { return layout.MomentStamp(t) }

// scopePrefix is the prefix of the index keys <kind>.<module>.<local> of
// everything, of a module, or of one kept data (its local a prefix too:
// the caller matches the local whole).
func scopePrefix(kind, module, local string) string {
	prefix := kind + "."
	if module != "" {
		prefix += module + "."
		if local != "" {
			prefix += local
		}
	}
	return prefix
}
