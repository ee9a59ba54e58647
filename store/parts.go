package store

import "context"

// PartSink is what a backend that stores objects in parts (S3 multipart
// uploads, object-store segments, a file written at offsets) hands to
// NewPartWriter, which does the buffering, the holding and the hashing for
// it, the same way for every backend.
type PartSink interface {
	// Part stores part n (1-based) of the object. data is PartSize bytes,
	// or fewer for the last part, in blocks; sum is its SHA-256. Parts may
	// come in any order (a held part comes last) and each n comes once. The
	// sink must not keep data after it returns: the writer reuses the
	// blocks (a sink over net/http must stop a request body from being read
	// once Part returned).
	Part(ctx context.Context, n int, data Blocks, sum [32]byte) error
	// Complete makes the object of parts 1..count, size bytes, with checksum
	// sum (CombineSums), visible whole under its key. An empty object is a
	// Complete with count 0 and no Part; an object of one short part 1 is
	// smaller than PartSize.
	Complete(ctx context.Context, count int, size int64, sum string) (Info, error)
	// Abort gives the object up and removes what Part stored, as far as it
	// can (Sweep removes the rest).
	Abort(ctx context.Context)
}

// PartReader is a PartSink that can keep a part where it can read it back
// (a JetStream object store's part objects; an S3 object of its own, since
// S3 reads no part of an upload in progress). NewPartWriter then keeps no
// part back for a hold: it hands a part the hold overlaps to KeepPart when it
// fills, keeps a copy of the held bytes alone, and when the hold ends reads
// the part back, patches it and hands it to Part.
type PartReader interface {
	// KeepPart keeps part n (data, whose SHA-256 is sum) so that ReadPart
	// can read it back. Part(n) follows, once, with the final bytes; the
	// sink's methods are never called at the same time.
	KeepPart(ctx context.Context, n int, data Blocks, sum [32]byte) error
	// ReadPart reads part n, as KeepPart kept it, into into, whose blocks
	// are as long as that part together (Blocks.Fill fills them).
	ReadPart(ctx context.Context, n int, into Blocks) error
}
