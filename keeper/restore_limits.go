package keeper

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// streamLimits is what of a stream's configuration removes messages on
// their own, as the point's manifest records it.
type streamLimits struct {
	MaxAge time.Duration // max_age; 0: none
	TTL    bool          // allow_msg_ttl: messages may carry a Nats-TTL header
	// Markers: subject_delete_marker_ttl is set, so the server writes a
	// marker message where max-age removes a subject's last message.
	Markers bool
}

// limitsOf reads the limits of a stream configuration (the server's JSON).
func limitsOf(raw json.RawMessage) streamLimits {
	var c struct {
		MaxAge  int64 `json:"max_age"`
		TTL     bool  `json:"allow_msg_ttl"`
		Markers int64 `json:"subject_delete_marker_ttl"`
	}
	_ = json.Unmarshal(raw, &c) // a manifest's config was checked when the point was taken
	return streamLimits{MaxAge: time.Duration(max(c.MaxAge, 0)), TTL: c.TTL, Markers: c.Markers > 0}
}

func (l streamLimits) any() bool { return l.MaxAge > 0 || l.TTL }

// planExpired counts, for each stream restored whole, the point's messages
// its limits remove as soon as it is restored: those older than its
// max-age (the server expires them at once) and those whose per-message
// TTL has passed (the server's restore skips them, RestoreStreamV2). The
// max-age alone is bounded first by the point's first and last message
// times (its backup.json); the archive is read only when the bound does not
// settle it, or when messages may carry a TTL. Other limits (max messages,
// bytes, messages per subject) held when the point was taken, under the
// same configuration, so they remove nothing.
func (k *Keeper) planExpired(ctx context.Context, pl *restorePlan) error {
	now := time.Now() // the server's clock expires them, not the keeper's (which a test may set)
	for i := range pl.changes {
		c := &pl.changes[i]
		sm := pl.manifest.Stream(c.Stream)
		if !restoresWhole(c) || sm == nil {
			continue
		}
		lim := limitsOf(sm.Config.Raw)
		if !lim.any() || sm.Held().Msgs == 0 {
			continue
		}
		n, err := countExpired(ctx, pl.arch, c.Stream, sm.Held().Msgs, lim, now)
		if err != nil {
			return Errorf(ErrFailed, "counting the messages of stream %s that its limits remove once restored: %v", c.Stream, err)
		}
		c.Expired = n
		if n > 0 {
			pl.around = append(pl.around, fmt.Sprintf("%d of the %d message(s) stream %s holds in the point are past its %s: the server removes them as soon as they are restored.",
				n, sm.Held().Msgs, c.Stream, lim))
		}
	}
	return nil
}

func (l streamLimits) String() string {
	var s []string
	if l.MaxAge > 0 {
		s = append(s, "max age of "+l.MaxAge.String())
	}
	if l.TTL {
		s = append(s, "per-message TTL")
	}
	return strings.Join(s, " or ")
}

// countExpired is how many of the msgs messages of stream in the archive
// lim removes at now.
func countExpired(ctx context.Context, a *openedArchive, stream string, msgs uint64, lim streamLimits, now time.Time) (uint64, error) {
	if !lim.TTL {
		first, last, err := pointTimes(a, stream)
		if err != nil {
			return 0, err
		}
		switch {
		case !first.IsZero() && first.Add(lim.MaxAge).After(now):
			return 0, nil
		case !last.IsZero() && !last.Add(lim.MaxAge).After(now):
			return msgs, nil
		}
	}
	var n uint64
	err := scanArchive(ctx, a, stream, func(m busarchive.ArchivedMessage) {
		if lim.expired(m.Time, m.Header, now) {
			n++
		}
	})
	return n, err
}

// pointTimes are the times of the stream's first and last message in the
// point, as its backup.json has them (zero when it does not).
func pointTimes(a *openedArchive, stream string) (first, last time.Time, err error) {
	r, err := a.StreamMeta(stream)
	if err != nil {
		return first, last, err
	}
	defer r.Close()
	var meta struct {
		State struct {
			First time.Time `json:"first_ts"`
			Last  time.Time `json:"last_ts"`
		} `json:"state"`
	}
	data, err := io.ReadAll(io.LimitReader(r, maxMetaRead))
	if err != nil {
		return first, last, err
	}
	if err := json.Unmarshal(data, &meta); err != nil {
		return first, last, fmt.Errorf("its backup.json does not decode: %w", err)
	}
	return meta.State.First, meta.State.Last, nil
}

// scanArchive calls fn with every message of stream in the archive, in
// order; the context stops it.
func scanArchive(ctx context.Context, a *openedArchive, stream string, fn func(busarchive.ArchivedMessage)) error {
	data, err := a.StreamData(stream)
	if err != nil {
		return err
	}
	defer data.Close()
	_, err = busarchive.ReadStreamArchive(data, nil, func(m busarchive.ArchivedMessage) error {
		fn(m)
		return ctx.Err()
	})
	return err
}

// expired reports whether a message stored at t (Unix ns) with header hdr
// is removed at now: past the max-age, or past its own TTL (as the
// server's restore decides: now after its time plus the TTL).
func (l streamLimits) expired(t int64, hdr []byte, now time.Time) bool {
	at := time.Unix(0, t)
	if l.MaxAge > 0 && !at.Add(l.MaxAge).After(now) {
		return true
	}
	ttl := messageTTL(hdr)
	return ttl > 0 && now.After(at.Add(ttl))
}

// messageTTL is a message's Nats-TTL header as the server reads it: a
// duration ("90s", at least a second) or whole seconds; 0 when none,
// "never" or unreadable.
func messageTTL(hdr []byte) time.Duration {
	i := bytes.Index(hdr, []byte("\r\nNats-TTL:"))
	if i < 0 {
		return 0
	}
	v := hdr[i+len("\r\nNats-TTL:"):]
	if end := bytes.Index(v, []byte("\r\n")); end >= 0 {
		v = v[:end]
	}
	s := strings.TrimSpace(string(v))
	if d, err := time.ParseDuration(s); err == nil {
		if d < time.Second {
			return 0
		}
		return time.Duration(int64(d.Seconds())) * time.Second
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return time.Duration(min(n, 1<<32)) * time.Second // past 136 years: never, as good as
	}
	return 0
}
