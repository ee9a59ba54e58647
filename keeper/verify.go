package keeper

import (
	"context"
	"fmt"
	"strings"
)

// VerifyKept re-checks one point's archive against its manifest, and the
// manifest against point.json, without restoring. A damaged point is an
// error wrapping ErrDamaged whose sentence lists every problem.
func (k *Keeper) VerifyKept(ctx context.Context, r Request) (*Reply, error) {
	if err := CheckRequest(VerbVerify, r); err != nil {
		return nil, err
	}
	p, rel, err := k.locatePoint(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("verify-kept: %w, so nothing was verified", withKind(ErrFailed, err))
	}
	progressFrom(ctx)(Progress{Verb: VerbVerify, Module: p.Module, Local: p.Local, Step: "verify",
		StreamsTotal: len(p.Streams), BytesTotal: p.ArchiveSize})
	a, err := k.openArchive(ctx, rel, p)
	if err != nil {
		return nil, fmt.Errorf("restore point %s does not verify: %w; it must not be restored", pointName(p), err)
	}
	defer a.Close()
	m, rep, err := k.verifyArchive(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("restore point %s does not verify: %w; it must not be restored", pointName(p), err)
	}
	if got, want := manifestNames(m), streamSumNames(p.Streams); strings.Join(got, ",") != strings.Join(want, ",") {
		return nil, Errorf(ErrDamaged, "restore point %s: point.json names streams %v but its archive holds %v",
			pointName(p), want, got)
	}
	vr := &VerifyReport{Point: k.abs(rel), Streams: streamSums(m), Bytes: m.Bytes()}
	if rep != nil {
		for i, s := range rep.Streams {
			if i < len(vr.Streams) && vr.Streams[i].Name == s.Name {
				vr.Streams[i].Messages = s.Messages
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Restore point %s verifies: %d stream(s), %s, every entry's size and SHA-256 match and every stream archive is whole",
		pointName(p), len(vr.Streams), HumanBytes(vr.Bytes))
	for _, s := range vr.Streams {
		fmt.Fprintf(&b, "; %s: %d message(s), sequences %d..%d, %d consumer(s)", s.Name, s.Messages, s.FirstSeq, s.LastSeq, s.Consumers)
	}
	b.WriteString(".")
	return &Reply{Said: b.String(), Point: p, Dir: k.abs(rel), Report: vr}, nil
}
