package keeper

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// subjectsCollide reports whether some subject matches both filters a and b
// (NATS subjects: "." separated tokens, "*" one token, ">" one or more at
// the end).
func subjectsCollide(a, b string) bool {
	ta, tb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		switch {
		case i == len(ta) && i == len(tb):
			return true
		case i == len(ta) || i == len(tb):
			return false
		case ta[i] == ">" || tb[i] == ">":
			return true
		case ta[i] == "*" || tb[i] == "*" || ta[i] == tb[i]:
			continue
		default:
			return false
		}
	}
}

// checkOverlaps refuses a restore whose streams would take subjects that a
// stream staying on the bus already takes: the server finds that only at
// the first data chunk, after the live data was removed. It names the
// overlapping stream. The server is asked, for each subject, which streams
// take an overlapping one, so the check costs a request or two a subject,
// not a list of every stream on the bus.
func (k *Keeper) checkOverlaps(ctx context.Context, pl *restorePlan) error {
	for _, ms := range pl.manifest.Streams {
		if !contains(pl.Restore, ms.Name) {
			continue
		}
		for _, sa := range ms.Config.Subjects {
			names, err := k.bus.StreamsTaking(ctx, sa)
			if err != nil {
				return Errorf(ErrFailed, "asking the bus which streams take subject %s, to check subject overlaps: %v", sa, err)
			}
			for _, other := range names {
				if other == ms.Name || containsStream(pl.live, other) {
					continue // it is the stream itself, or it is removed first
				}
				return Errorf(ErrConflict, "stream %s of %s takes subject %s, which overlaps %s of stream %s on the bus; "+
					"the server would refuse to restore it; %s", ms.Name, sourceName(pl.point), sa, k.overlapping(ctx, other, sa), other,
					k.overlapNext(ctx, pl, other))
			}
		}
	}
	return nil
}

// overlapping names the subject of stream that overlaps sa, for the
// refusal's sentence ("a subject" when the stream cannot be read now).
func (k *Keeper) overlapping(ctx context.Context, stream, sa string) string {
	if si, err := k.bus.Stream(ctx, stream); err == nil && si != nil {
		for _, sb := range si.Subjects {
			if subjectsCollide(sa, sb) {
				return "subject " + sb
			}
		}
	}
	return "a subject"
}

// overlapNext is what to do about stream other, which blocks the restore
// of pl: set it aside first when it is a stream of another kept data the
// keeper knows (an aside-only restore of that kept data), else record a
// plan that adds it to the restored kept data, so that the restore sets it
// aside with the rest.
func (k *Keeper) overlapNext(ctx context.Context, pl *restorePlan, other string) string {
	p := pl.point
	kd, by, found := k.keptOwning(ctx, other)
	if found && kd != [2]string{p.Module, p.Local} {
		body, _ := json.Marshal(map[string]any{"module": kd[0], "local": kd[1], "aside-only": true, "why": "TEXT"})
		return fmt.Sprintf("stream %s is a stream of kept data %s/%s (%s): set it aside first with "+
			"`nats-keeper restore-kept %s %s --aside-only --why TEXT` (the request %s to %s), then restore again",
			other, kd[0], kd[1], by, kd[0], kd[1], body, VerbRestore)
	}
	streams := slices.Clone(pl.Restore)
	for _, s := range append(streamNames(pl.live), other) {
		if !slices.Contains(streams, s) {
			streams = append(streams, s)
		}
	}
	body, _ := json.Marshal(map[string]any{"module": p.Module, "local": p.Local, "streams": streams, "why": "TEXT"})
	return fmt.Sprintf("stream %s belongs to no kept data this keeper knows: a plan that adds it to %s/%s makes the restore set it aside "+
		"with the rest, `nats-keeper plan set %s %s %s --why TEXT` (the request %s to %s), then restore again",
		other, p.Module, p.Local, p.Module, p.Local, strings.Join(streams, " "), body, VerbSetPlan)
}

// keptOwning finds the kept data the keeper knows (by a plan, a point or
// an aside in the index) that stream belongs to: the one whose plan lists
// it, else one without a plan whose naming rule gives it. by says how. It
// finds none when the index cannot be read now.
func (k *Keeper) keptOwning(ctx context.Context, stream string) (kd [2]string, by string, found bool) {
	known := map[[2]string]bool{}
	planned := map[[2]string]bool{}
	for _, prefix := range [...]string{"plan.", "point.", "aside."} {
		keys, err := k.index.Keys(ctx, prefix)
		if err != nil {
			return kd, "", false
		}
		for _, key := range keys {
			parts := strings.Split(key, ".")
			if len(parts) < 3 {
				continue
			}
			one := [2]string{parts[1], parts[2]}
			known[one] = true
			if prefix != "plan." {
				continue
			}
			planned[one] = true
			if pl, err := k.readPlan(ctx, one[0], one[1]); err == nil && slices.Contains(pl.Streams, stream) {
				return one, "its plan lists it", true
			}
		}
	}
	all := make([][2]string, 0, len(known))
	for one := range known {
		all = append(all, one)
	}
	slices.SortFunc(all, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
	for _, one := range all {
		if !planned[one] && slices.Contains(namingRule(one[0], one[1]), stream) {
			return one, "by the naming rule", true
		}
	}
	return kd, "", false
}
