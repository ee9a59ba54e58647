package store

import "context"

// PartSink is what a backend that stores objects in parts (S3 multipart
// uploads, object-store segments, a file written at offsets) hands to
// NewPartWriter, which does the buffering, the holding and the hashing for
// it, the same way for every backend.
type PartSink interface {
	// Part stores part n (1-based) of the object. data is PartSize bytes,
	// or fewer for the last part; sum is its SHA-256. Parts may come in any
	// order (a held part comes last) and each n comes once. The sink must not
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
