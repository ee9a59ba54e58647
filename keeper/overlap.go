package keeper

import (
	"context"
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
					"the server would refuse to restore it", ms.Name, sourceName(pl.point), sa, k.overlapping(ctx, other, sa), other)
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
