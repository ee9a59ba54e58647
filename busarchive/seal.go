package busarchive

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// manifest.json is the indented JSON of the Manifest without its seal, whose
// closing "\n}" is replaced by the seal field below. The seal hashes the bytes
// before that replacement, so it covers every byte of the manifest but its own
// field, and checking it needs no re-encoding (which would tie the check to how
// a later Go or jsm.go renders the same values).
const (
	sealPrefix = ",\n  \"seal\": \""
	sealSuffix = "\"\n}\n"
	sealLen    = len(sealPrefix) + 2*sha256.Size + len(sealSuffix)
)

// sealManifest renders m as manifest.json with its seal.
func sealManifest(m *Manifest) ([]byte, error) {
	c := *m
	c.Seal = ""
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode manifest.json: %w", err)
	}
	if !bytes.HasSuffix(b, []byte("\n}")) {
		return nil, fmt.Errorf("encode manifest.json: the JSON does not end as an indented object")
	}
	sum := sha256.Sum256(b)
	out := make([]byte, 0, len(b)+sealLen)
	out = append(out, b[:len(b)-2]...)
	out = append(out, sealPrefix...)
	out = append(out, hex.EncodeToString(sum[:])...)
	out = append(out, sealSuffix...)
	return out, nil
}

// checkSeal checks manifest.json's seal against its bytes.
func checkSeal(b []byte) error {
	if len(b) < sealLen+2 {
		return &EntryError{Entry: ManifestName, Kind: ErrChecksum, Detail: "the manifest is too short to carry its seal"}
	}
	tail := b[len(b)-sealLen:]
	if !bytes.HasPrefix(tail, []byte(sealPrefix)) || !bytes.HasSuffix(tail, []byte(sealSuffix)) {
		return &EntryError{Entry: ManifestName, Kind: ErrChecksum, Detail: "the manifest does not end with its seal"}
	}
	want := string(tail[len(sealPrefix) : len(sealPrefix)+2*sha256.Size])
	h := sha256.New()
	h.Write(b[:len(b)-sealLen])
	h.Write([]byte("\n}"))
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return &EntryError{Entry: ManifestName, Kind: ErrChecksum, Detail: fmt.Sprintf("the manifest's SHA-256 is %s but its seal says %q", got, want)}
	}
	return nil
}
