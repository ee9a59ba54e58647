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
// overlapping stream.
func (k *Keeper) checkOverlaps(ctx context.Context, pl *restorePlan) error {
	all, err := k.bus.Streams(ctx)
	if err != nil {
		return Errorf(ErrFailed, "listing the streams on the bus to check subject overlaps: %v", err)
	}
	for _, ms := range pl.manifest.Streams {
		if !contains(pl.Restore, ms.Name) {
			continue
		}
		for _, other := range all {
			if other.Name == ms.Name || containsStream(pl.live, other.Name) {
				continue // it is the stream itself, or it is removed first
			}
			for _, sa := range ms.Config.Subjects {
				for _, sb := range other.Subjects {
					if subjectsCollide(sa, sb) {
						return Errorf(ErrConflict, "stream %s of %s takes subject %s, which overlaps subject %s of stream %s on the bus; "+
							"the server would refuse to restore it", ms.Name, sourceName(pl.point), sa, sb, other.Name)
					}
				}
			}
		}
	}
	return nil
}
