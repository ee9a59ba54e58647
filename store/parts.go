package store

import "context"

// PartSink is what a backend that stores objects in parts (S3 multipart
// uploads, object-store segments, a file written at offsets) hands to
// NewPartWriter, which does the buffering, the holding and the hashing for
// it, the same way for every backend.
type PartSink interface {
	// Part stores part n (1-based) of the object. data is PartSize bytes,
	// or fewer for the last part; sum is its SHA-256. Parts may come in any
	// order (a held part comes last) and each n comes once, except to a
	// PartReader, which may be given a part again (read back and patched):
	// the second replaces the first. The sink must not
	// keep data after it returns: the writer reuses the buffer (a sink over
	// net/http must stop a request body from being read once Part returned).
	Part(ctx context.Context, n int, data []byte, sum [32]byte) error
	// Complete makes the object of parts 1..count, size bytes, with checksum
	// sum (CombineSums), visible whole under its key. An empty object is a
	// Complete with count 0 and no Part; an object of one short part 1 is
	// smaller than PartSize.
	Complete(ctx context.Context, count int, size int64, sum string) (Info, error)
	// Abort gives the object up and removes what Part stored, as far as it
	// can (Sweep removes the rest).
	Abort(ctx context.Context)
}

// PartReader is a PartSink that can read a part it stored back, as stored
// (a JetStream object store can; S3 reads no part of an upload in progress).
// NewPartWriter then keeps no part back for a hold: it stores the part with
// the held bytes at once, keeps a copy of the held bytes alone, and when the
// hold ends reads back each stored part that WriteAt changed, patches it and
// stores it again.
type PartReader interface {
	// ReadPart reads part n, as Part stored it, into into, which is as long
	// as that part.
	ReadPart(ctx context.Context, n int, into []byte) error
}
