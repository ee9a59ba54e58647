package keeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
)

// VerifyKept re-checks one point's archive against its manifest, and the
// manifest against point.json, without restoring; an encrypted archive is
// decrypted as it is hashed. A damaged point is an error wrapping
// ErrDamaged whose sentence lists every problem. A keeper without the
// identity of an encrypted point checks what it can, the stored ciphertext
// against the checksum point.json names, and then refuses with ErrLocked,
// saying plainly that the contents were not checked. An incremental point
// is checked from its base and segments and writes nothing
// (verifyIncremental).
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
	if p.Incremental {
		return k.verifyIncremental(ctx, r, p, rel)
	}
	a, err := k.openArchive(ctx, rel, p)
	if errors.Is(err, ErrLocked) {
		return nil, k.verifyCiphertext(ctx, rel, p, err)
	}
	if err != nil {
		return nil, fmt.Errorf("restore point %s does not verify: %w; it must not be restored", pointName(p), err)
	}
	defer a.Close()
	m, rep, err := k.verifyArchive(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("restore point %s does not verify: %w; it must not be restored", pointName(p), err)
	}
	if got, want := m.StreamNames(), kept.StreamSumNames(p.Streams); strings.Join(got, ",") != strings.Join(want, ",") {
		return nil, Errorf(ErrDamaged, "restore point %s: point.json names streams %v but its archive holds %v",
			pointName(p), want, got)
	}
	indexed, err := k.verifyKeyIndexes(ctx, a, p)
	if err != nil {
		return nil, err
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
	if indexed > 0 {
		fmt.Fprintf(&b, "; its key index of %d stream(s) matches point.json and agrees with the archive", indexed)
	}
	b.WriteString(".")
	return &Reply{Said: b.String(), Point: p, Dir: k.abs(rel), Report: vr}, nil
}

// verifyCiphertext is verify-kept of an encrypted point this keeper cannot
// decrypt (locked, why): every stored byte is read and its checksum
// compared with point.json's; either way the reply is an error, for the
// contents were not checked.
func (k *Keeper) verifyCiphertext(ctx context.Context, rel string, p *Point, locked error) error {
	where := k.abs(archiveKeyOf(rel, p))
	if p.ArchiveSum == "" {
		return fmt.Errorf("restore point %s was not verified: %w, and point.json names no checksum of the ciphertext to check it by", pointName(p), locked)
	}
	o, err := k.store.Open(ctx, archiveKeyOf(rel, p))
	if err != nil {
		return fmt.Errorf("restore point %s was not verified: %w; opening its ciphertext failed too: %w", pointName(p), locked, err)
	}
	defer o.Close()
	r, err := o.Reader(ctx, 0, o.Size())
	if err != nil {
		return fmt.Errorf("restore point %s was not verified: %w; reading its ciphertext failed too: %w", pointName(p), locked, err)
	}
	defer r.Close()
	sum := store.NewChecksum()
	n, err := io.Copy(sum, r)
	if err != nil {
		return fmt.Errorf("restore point %s was not verified: %w; reading its ciphertext failed too: %w", pointName(p), locked, err)
	}
	if got := sum.Sum(); n != p.ArchiveSize || got != p.ArchiveSum {
		return fmt.Errorf("restore point %s does not verify: %w; it must not be restored", pointName(p), &DamagedError{Path: where,
			Problems: []string{fmt.Sprintf("its ciphertext is %d bytes with checksum %s, but point.json says %d bytes with checksum %s", n, got, p.ArchiveSize, p.ArchiveSum)}})
	}
	if err := k.checkStoredKeyIndexes(ctx, rel, p); err != nil {
		return err
	}
	return fmt.Errorf("restore point %s: its stored ciphertext (%s) matches the checksum point.json names, but its contents were NOT checked against its manifest: %w; "+
		"a keeper with the identity (--identity) checks them", pointName(p), HumanBytes(n), locked)
}
