package kept

import (
	"strings"
	"unicode/utf8"
)

// MaxStreamNameLen is the longest stream or consumer name accepted, in bytes.
const MaxStreamNameLen = 255

// ValidStreamName reports whether name is acceptable as a JetStream stream
// or consumer name: non-empty, at most MaxStreamNameLen bytes of valid
// UTF-8, and free of ". * > / \ space", NUL and every other control
// character. Such a name is one subject token, one path component of the
// archive's layout and one file name.
//
// This is the one rule for stream and consumer names in nats-keeper: the
// request checks (CheckStreamName, for plans and requests), the JetStream
// adapter and the archive (busarchive.ValidStreamName) all apply it. It
// lives here, in the contract, which imports only the standard library, so
// that busarchive can import it.
func ValidStreamName(name string) bool {
	if name == "" || len(name) > MaxStreamNameLen || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(".*>/\\ ", r) {
			return false
		}
	}
	return true
}
