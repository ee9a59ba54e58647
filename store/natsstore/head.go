package natsstore

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/store"
)

// An object is a head under its key plus one hidden object-store object per
// part. Part names begin with "/", which no store key may (store.CheckKey),
// so they never collide with a key and List leaves them out by name.
const (
	partsRoot   = "/parts/"          // partsRoot<upload>/<n>
	headHeader  = "Nats-Keeper-Head" // on a head; the head format version
	partHeader  = "Nats-Keeper-Part" // on a part; its number
	headVersion = "1"

	// Metadata of a head (so Stat and List need no head body) and of a part
	// (so Sweep can tell whose part it is).
	mdSize   = "keeper-size"
	mdSum    = "keeper-sum"
	mdUpload = "keeper-upload"
	mdParts  = "keeper-parts"
	mdKey    = "keeper-key"
)

// head is the body of a head object: the parts, in order, with their
// SHA-256s. All parts but the last are PartSize bytes.
type head struct {
	Version  int      `json:"version"`
	Upload   string   `json:"upload"`
	Size     int64    `json:"size"`
	Sum      string   `json:"sum"`
	PartSize int64    `json:"part_size"`
	Parts    []string `json:"parts"`
}

func newUploadID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func partName(upload string, n int) string {
	return partsRoot + upload + "/" + strconv.Itoa(n)
}

// partOf splits a part name into its upload and number; ok is false for any
// other name.
func partOf(name string) (upload string, n int, ok bool) {
	rest, found := strings.CutPrefix(name, partsRoot)
	if !found {
		return "", 0, false
	}
	upload, num, found := strings.Cut(rest, "/")
	n, err := strconv.Atoi(num)
	return upload, n, found && err == nil && n > 0
}

// metaSubject and chunkSubject are the object store's own subjects (ADR-20):
// the meta message of a name and the chunks of one put.
func metaSubject(bucket, name string) string {
	return "$O." + bucket + ".M." + base64.URLEncoding.EncodeToString([]byte(name))
}

func chunkSubject(bucket, nuid string) string { return "$O." + bucket + ".C." + nuid }

// digestOf is the object store's digest of bytes whose SHA-256 is sum.
func digestOf(sum [32]byte) string {
	return "SHA-256=" + base64.URLEncoding.EncodeToString(sum[:])
}

func isHead(info *jetstream.ObjectInfo) bool { return info.Headers.Get(headHeader) != "" }

// headSummary reads what a head's metadata says: the object's size and sum,
// its upload and its part count.
func headSummary(info *jetstream.ObjectInfo) (size int64, sum, upload string, parts int, err error) {
	md := info.Metadata
	size, err1 := strconv.ParseInt(md[mdSize], 10, 64)
	parts, err2 := strconv.Atoi(md[mdParts])
	sum, upload = md[mdSum], md[mdUpload]
	if v := info.Headers.Get(headHeader); v != headVersion {
		return 0, "", "", 0, fmt.Errorf("the head of %s has format %q, which this keeper does not read", info.Name, v)
	}
	if err1 != nil || err2 != nil || size < 0 || parts != partCount(size) || len(sum) != 64 || upload == "" {
		return 0, "", "", 0, fmt.Errorf("the head of %s has damaged metadata %v, so its object cannot be read", info.Name, md)
	}
	return size, sum, upload, parts, nil
}

// partCount is how many PartSize parts an object of size bytes has.
func partCount(size int64) int { return int((size + store.PartSize - 1) / store.PartSize) }

// decodeHead parses a head body and checks it against its metadata.
func decodeHead(info *jetstream.ObjectInfo, body []byte) (*head, error) {
	size, sum, upload, parts, err := headSummary(info)
	if err != nil {
		return nil, err
	}
	var h head
	if err := json.Unmarshal(body, &h); err != nil {
		return nil, fmt.Errorf("the head of %s is not valid JSON (%v), so its object cannot be read", info.Name, err)
	}
	sums := make([][32]byte, len(h.Parts))
	for i, p := range h.Parts {
		b, err := hex.DecodeString(p)
		if err != nil || len(b) != 32 {
			return nil, fmt.Errorf("the head of %s names part %d with a damaged SHA-256 %q", info.Name, i+1, p)
		}
		copy(sums[i][:], b)
	}
	if h.Size != size || h.Sum != sum || h.Upload != upload || len(h.Parts) != parts ||
		h.PartSize != store.PartSize || store.CombineSums(sums) != sum {
		return nil, fmt.Errorf("the head of %s disagrees with its own metadata (size %d, %d parts, sum %s), so its object cannot be read",
			info.Name, size, parts, sum)
	}
	return &h, nil
}
