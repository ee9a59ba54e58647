package keeper

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/kept"
)

// planAround adds to the plan's changes what the restore means around the
// kept data, touching nothing:
//
//   - BumpedTo: a full restore over a live stream whose last sequence is
//     past the point's keeps that last sequence (the archive's head is
//     bumped to it as it is sent), so no sequence is used twice and
//     watchers and expected-last-sequence writers go on;
//   - Downstream: the streams of this account that mirror or source a
//     restored stream, and what the method means for them; a full restore
//     of such a stream is refused unless the request says downstream
//     "leave" (a dry run says so instead of refusing);
//   - LiveConsumers: the live consumers on a restored stream that are not
//     the module's durables (watchers, ordered and ephemeral consumers,
//     other apps' durables), and what the method means for them;
//   - Expired: the point's messages the stream's limits remove as soon as
//     it is restored (restore_limits.go).
//
// planMethods runs first (each change has its method) and calls it at its
// end.
func (k *Keeper) planAround(ctx context.Context, r Request, pl *restorePlan) error {
	if pl.AsideOnly || pl.manifest == nil {
		return nil
	}
	pl.changeEach()
	live := map[string]StreamInfo{}
	for _, s := range pl.live {
		live[s.Name] = s
	}
	for i := range pl.changes {
		pl.planBump(&pl.changes[i], live)
	}
	if err := k.planDownstream(ctx, r, pl, live); err != nil {
		return err
	}
	if err := k.planLiveConsumers(ctx, r, pl, live); err != nil {
		return err
	}
	return k.planExpired(ctx, pl)
}

// changeEach makes sure every stream the point restores has its change
// (planMethods makes them; one it did not make restores as today: full).
func (pl *restorePlan) changeEach() {
	for _, s := range pl.Restore {
		if !slices.ContainsFunc(pl.changes, func(c kept.StreamChange) bool { return c.Stream == s }) {
			pl.changes = append(pl.changes, kept.StreamChange{Stream: s})
		}
	}
}

// restoresWhole reports whether the change's stream is restored from the
// point's archive: the full method, or a change no method was chosen for
// (today's restore).
func restoresWhole(c *kept.StreamChange) bool {
	return c.Method != kept.MethodDelta && c.Method != kept.MethodLogical
}

// pointLast is the last sequence of stream in the point (0 when the
// manifest does not hold it).
func (pl *restorePlan) pointLast(stream string) uint64 {
	if sm := pl.manifest.Stream(stream); sm != nil {
		return sm.State.LastSeq
	}
	return 0
}

// planBump sets BumpedTo for a stream restored whole over a live stream
// whose last sequence is past the point's. Every point verifies as a
// NATSARC1 archive, whose head the server's restore honours
// (RestoreStreamV2 pads with skipped sequences up to its last_seq), so the
// bump is always possible where it is needed.
func (pl *restorePlan) planBump(c *kept.StreamChange, live map[string]StreamInfo) {
	l, ok := live[c.Stream]
	if !ok || !restoresWhole(c) || l.LastSeq <= pl.pointLast(c.Stream) {
		return
	}
	c.BumpedTo = l.LastSeq
	pl.around = append(pl.around, fmt.Sprintf("Stream %s is restored with its last sequence kept at %d (the point's is %d), so no sequence is used twice: watchers and writers that expect the last sequence go on.",
		c.Stream, l.LastSeq, pl.pointLast(c.Stream)))
}

// planDownstream finds the streams that mirror or source the restored
// streams (but those restored with them) and says what the restore means
// for each. A full restore of a stream that has any is refused, before
// anything changes, unless the request says downstream "leave".
func (k *Keeper) planDownstream(ctx context.Context, r Request, pl *restorePlan, live map[string]StreamInfo) error {
	// Every stream of the point, whatever its method: a delta stream stays
	// on the bus, out of the plan's Restore.
	streams := make([]string, len(pl.changes))
	for i, c := range pl.changes {
		streams[i] = c.Stream
	}
	ds, err := k.bus.Downstreams(ctx, streams)
	if err != nil {
		return Errorf(ErrFailed, "looking for the streams that mirror or source %s: %v", strings.Join(streams, ", "), err)
	}
	var refused []string
	for i := range pl.changes {
		c := &pl.changes[i]
		for _, d := range ds {
			if d.Upstream != c.Stream || contains(streams, d.Stream) {
				continue
			}
			l, isLive := live[c.Stream]
			eff := downstreamEffect(d, c, pl.pointLast(c.Stream), l.LastSeq, isLive)
			c.Downstream = append(c.Downstream, kept.Downstream{Stream: d.Stream, Kind: d.Kind, Effect: eff})
			pl.around = append(pl.around, fmt.Sprintf("Stream %s is %s by %s: %s", c.Stream, kindDone(d.Kind), d.Stream, eff))
		}
		if len(c.Downstream) > 0 && restoresWhole(c) && r.Downstream != kept.DownstreamLeave {
			refused = append(refused, c.Stream+" ("+downstreamNames(c.Downstream)+")")
		}
	}
	if len(refused) == 0 {
		return nil
	}
	why := fmt.Sprintf("a full restore of %s would leave the streams that mirror or source it disagreeing with it (each one's effect is in the dry run); "+
		"use the delta method where the point is a prefix of the live stream (auto picks it then), or say downstream \"leave\" to restore it all the same and repair them as the reply says",
		strings.Join(refused, ", "))
	if r.DryRun {
		pl.around = append(pl.around, "The restore would be refused: "+why+".")
		return nil
	}
	return Errorf(ErrConflict, "%s", why)
}

func kindDone(kind string) string {
	if kind == "mirror" {
		return "mirrored"
	}
	return "sourced"
}

func downstreamNames(ds []kept.Downstream) string {
	var names []string
	for _, d := range ds {
		names = append(names, d.Kind+" "+d.Stream)
	}
	return strings.Join(names, ", ")
}

// downstreamEffect says what the change's method means for the stream d
// that mirrors or sources it, and how to repair what goes wrong, as
// nats-server 2.15.3 behaves (keeper/restore_around_test.go shows each):
// a mirror copies only forward, at its upstream's sequences, from its own
// last sequence + 1, and never deletes what its upstream deletes (it takes
// message deletes by hand); a source that sees its upstream made again
// (the stream's identity is its creation time) takes it again from its
// start, or from its opt_start_seq when it has one.
func downstreamEffect(d Downstream, c *kept.StreamChange, pointLast, liveLast uint64, live bool) string {
	up := c.Stream
	switch c.Method {
	case kept.MethodLogical:
		return fmt.Sprintf("logical: it receives the point's values as new messages, as any write; nothing is removed from %s or from it.", up)
	case kept.MethodDelta:
		if liveLast <= pointLast {
			return fmt.Sprintf("delta: nothing is removed from %s; it keeps flowing.", up)
		}
		if d.Kind == "mirror" {
			return fmt.Sprintf("delta: it keeps copying, new messages at %s's own sequences; it keeps the messages the rollback removes (sequences %d-%d), "+
				"since a mirror never deletes what its upstream deletes. To make it agree, delete those sequences from it (a mirror takes message deletes), or delete it and create it again.",
				up, pointLast+1, liveLast)
		}
		return fmt.Sprintf("delta: it keeps receiving new messages; the messages the rollback removes from %s (its sequences %d-%d) stay in it as it stored them, at its own sequences: delete them from it by hand where they matter.",
			up, pointLast+1, liveLast)
	}
	last := max(c.BumpedTo, pointLast)
	if d.Kind == "source" {
		return fmt.Sprintf("full: the server sees %s made again and sources it again from its start: it receives the point's messages a second time, then the new ones, "+
			"and keeps the live messages the restore removes. To avoid the duplicates, set the source's opt_start_seq to %d before the restore (it then takes only messages after %d); after it, delete the duplicates from it by hand.",
			up, last+1, last)
	}
	if c.BumpedTo > 0 {
		return fmt.Sprintf("full: %s ends at %d as before, so once the mirror notices it was made again (about 10 s) it copies on from %d at the same sequences; "+
			"it keeps the live messages the restore removes (sequences %d-%d) and lacks any message of the point it never copied. "+
			"To make it agree, delete those sequences from it (a mirror takes message deletes), or delete it and create it again (it copies the whole stream again).",
			up, c.BumpedTo, c.BumpedTo+1, pointLast+1, c.BumpedTo)
	}
	if !live {
		return fmt.Sprintf("full: %s is not on the bus now and is restored ending at %d; a mirror that holds later sequences takes only messages above its own last, "+
			"so it misses new messages until %s passes it and reports lag 0 all the same. Repair: delete the mirror and create it again.", up, pointLast, up)
	}
	return fmt.Sprintf("full: %s ends at %d, where it ended before (%d) or past it; the mirror copies on from its own last sequence, "+
		"and where the point's messages differ from what it holds at the same sequences it keeps its own and reports lag 0. Repair: delete the mirror and create it again.",
		up, pointLast, liveLast)
}

// planLiveConsumers names, on each restored stream that is live now, the
// consumers that are not the module's durables, and what the stream's
// method means for each.
func (k *Keeper) planLiveConsumers(ctx context.Context, r Request, pl *restorePlan, live map[string]StreamInfo) error {
	for i := range pl.changes {
		c := &pl.changes[i]
		if _, ok := live[c.Stream]; !ok {
			continue
		}
		cs, err := k.bus.StreamConsumers(ctx, c.Stream)
		if err != nil {
			return Errorf(ErrFailed, "listing the consumers of stream %s: %v", c.Stream, err)
		}
		for _, b := range cs {
			if b.Durable && pl.modules(r.Module, c.Stream, b.Name) {
				continue
			}
			kind := "ephemeral"
			switch {
			case b.Durable:
				kind = "durable"
			case b.Ordered:
				kind = "ordered"
			}
			c.LiveConsumers = append(c.LiveConsumers, kept.LiveConsumer{Consumer: b.Name, Kind: kind, Sees: consumerSees(kind, c, pl.pointLast(c.Stream))})
		}
		if n := len(c.LiveConsumers); n > 0 {
			pl.around = append(pl.around, fmt.Sprintf("Stream %s has %d live consumer(s) that are not the module's durables (%s). %s",
				c.Stream, n, liveConsumerNames(c.LiveConsumers), distinctSees(c.LiveConsumers)))
		}
	}
	return nil
}

// modules reports whether the durable consumer on stream is taken for
// module's: the point records its position (it was the module's then), or
// its name fits the module's naming rule. (planAround runs before the
// positions are planned, so the census's ownership rules, metadata
// included, are not at hand: a durable that only its metadata gives the
// module is named among the live consumers, which says more, not less.)
func (pl *restorePlan) modules(module, stream, consumer string) bool {
	if fitsModule(module, consumer) {
		return true
	}
	return slices.ContainsFunc(pl.point.Positions, func(p Position) bool { return p.Stream == stream && p.Consumer == consumer })
}

func liveConsumerNames(lcs []kept.LiveConsumer) string {
	var names []string
	for _, c := range lcs {
		names = append(names, c.Kind+" "+c.Consumer)
	}
	return strings.Join(names, ", ")
}

// distinctSees is what the consumers see, each sentence once, by kind.
func distinctSees(lcs []kept.LiveConsumer) string {
	var out []string
	for _, c := range lcs {
		if s := "The " + c.Kind + " one(s): " + c.Sees; !contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// consumerSees says what the change's method means for a live consumer of
// kind ("ordered", "ephemeral" or "durable") that is not the module's.
func consumerSees(kind string, c *kept.StreamChange, pointLast uint64) string {
	switch c.Method {
	case kept.MethodLogical:
		return "logical: it stays, and sees every rolled-back key (or object) as a new revision, a delete where the point had none."
	case kept.MethodDelta:
		if kind == "ordered" {
			return "delta: it stays and does not see the rollback (the removed messages it had stay seen); it goes on from its own next sequence with new writes."
		}
		return "delta: it stays where it is; removed messages not yet delivered to it are skipped, and it goes on with new messages."
	}
	switch kind {
	case "ordered":
		if c.BumpedTo > 0 {
			return fmt.Sprintf("full: it is removed with the stream; its client (a KV watcher, an ordered consumer) makes it again from the next sequence it had not seen, "+
				"so it does not see the rollback (the point's values are not sent to it again) and receives every write made after it, from %d on.", c.BumpedTo+1)
		}
		return fmt.Sprintf("full: it is removed with the stream; its client makes it again from the next sequence it had not seen, which the restored stream (ending at %d) "+
			"may reach only after new writes, which it then misses: restart it.", pointLast)
	case "durable":
		return "full: it is removed with the stream; it comes back only if the point holds it, at its position then (its app hears again what it read since), else its app must create it again."
	}
	return "full: it is removed with the stream; its client gets no more messages until it creates it again."
}
