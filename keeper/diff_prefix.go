package keeper

import (
	"encoding/json"
	"fmt"

	"github.com/nats-keeper/nats-keeper/kept"
)

// notPrefix says why the point is not a prefix of the live stream, or "".
func notPrefix(d streamDiff, c seqCounts, fixed string) string {
	live := d.Live
	switch {
	case live == nil:
		return "the stream is not on the bus"
	case live.LastSeq < c.point:
		return fmt.Sprintf("the live stream's last sequence %d is below the point's %d: it was made again since", live.LastSeq, c.point)
	case c.extra > 0:
		return fmt.Sprintf("the live stream holds %s %s at or below the point's last sequence that the point lacks: it was made again since",
			kept.Thousands(c.extra), kept.Plural(int(min(c.extra, 2)), "message", "messages"))
	case c.removed > 0:
		return fmt.Sprintf("%s %s of the point %s deleted since", kept.Thousands(c.removed),
			kept.Plural(int(min(c.removed, 2)), "message", "messages"), kept.Plural(int(min(c.removed, 2)), "was", "were"))
	case fixed != "":
		return "its configuration cannot be set back: " + fixed
	}
	return ""
}

// tailStays says why the live tail cannot be deleted message by message
// (the live stream is sealed or denies deletes, as every KV bucket does),
// or "".
func tailStays(d streamDiff) string {
	if d.Live == nil || d.TailCount == 0 {
		return ""
	}
	f := liveFlags(d.Live.Config)
	if !f.Sealed && !f.DenyDelete {
		return ""
	}
	return fmt.Sprintf("the live stream is sealed or denies message deletes (a KV bucket does), so the %s %s after the point cannot be deleted one by one",
		kept.Thousands(d.TailCount), kept.Plural(int(min(d.TailCount, 2)), "message", "messages"))
}

// streamFlags are the fields of a live configuration that keep its
// messages.
type streamFlags struct {
	Sealed     bool `json:"sealed"`
	DenyDelete bool `json:"deny_delete"`
}

func liveFlags(cfg json.RawMessage) streamFlags {
	var f streamFlags
	_ = json.Unmarshal(cfg, &f) // configChanges read it before
	return f
}
