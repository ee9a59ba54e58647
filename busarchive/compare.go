package busarchive

import (
	"errors"
	"fmt"
)

// ErrMismatch is a stream archive whose content disagrees with the manifest.
var ErrMismatch = errors.New("archive content disagrees with its manifest")

// compareState compares what a stream archive holds with the manifest's state,
// which is backup.json's: the state the server answered the snapshot request
// with.
//
// What is sound to compare follows from the server (stream_backup.go,
// CreateStreamSnapshotV2 and streamSnapshotV2): it takes the stream's state
// once (FastState), answers the request with it (the keeper, like jsm.go,
// writes it to backup.json) and writes the very same values as state.json,
// except the consumer count, which it counts again from the consumers it is
// about to write. It then writes the messages from FirstSeq to LastSeq of that state
// that still exist as it reads them: writes go on during a snapshot, and
// limits (max age, max messages, a KV bucket's history) may remove messages
// in that range before they are read, but nothing outside the range is ever
// written. So:
//   - state.json's first and last sequence, messages and bytes must equal the
//     manifest's exactly;
//   - the messages found are at most the manifest's count, and lie within its
//     first and last sequence (the decoder already holds them ascending and at
//     or after first);
//   - the consumers found (the decoder holds them equal to state.json's count)
//     must equal the manifest's. They can differ only if a consumer was added
//     or removed in the instant between the server's two counts (on a
//     cluster: if the leader's stored consumers and the consumer assignments
//     it counts for state.json disagree at that instant); refusing that
//     archive is the safe side, since it cannot be shown to hold every
//     consumer, and taking the restore point again cures it.
func compareState(entry string, want StreamState, st *snapState, rep *StreamReport) []error {
	var out []error
	bad := func(format string, args ...any) {
		out = append(out, &EntryError{Entry: entry, Kind: ErrMismatch, Detail: fmt.Sprintf(format, args...)})
	}
	if st.FirstSeq != want.FirstSeq || st.LastSeq != want.LastSeq || st.Msgs != want.Msgs || st.Bytes != want.Bytes {
		bad("state.json gives sequences %d to %d, %d messages, %d bytes; the manifest %d to %d, %d messages, %d bytes",
			st.FirstSeq, st.LastSeq, st.Msgs, st.Bytes, want.FirstSeq, want.LastSeq, want.Msgs, want.Bytes)
	}
	if rep.Messages > want.Msgs {
		bad("the snapshot holds %d messages, more than the %d the manifest records", rep.Messages, want.Msgs)
	}
	if rep.Messages > 0 && (rep.FirstSeq < want.FirstSeq || rep.LastSeq > want.LastSeq) {
		bad("the snapshot holds sequences %d to %d, outside the manifest's %d to %d", rep.FirstSeq, rep.LastSeq, want.FirstSeq, want.LastSeq)
	}
	if rep.Consumers != want.Consumers {
		bad("the snapshot holds %d consumers, the manifest records %d", rep.Consumers, want.Consumers)
	}
	return out
}

// compareCut compares what the archive of a stream cut at a moment holds
// (rep, and its messages' bytes as the server counts them: stored) with
// what the manifest's cut records (StreamCut): the messages, their bytes
// and first and last sequence exactly; the first sequence left out after
// the last held and within the state's sequences.
func compareCut(entry string, sm *StreamManifest, rep *StreamReport, stored uint64) []error {
	c := sm.Cut
	if c == nil {
		return nil
	}
	var out []error
	bad := func(format string, args ...any) {
		out = append(out, &EntryError{Entry: entry, Kind: ErrMismatch, Detail: fmt.Sprintf(format, args...)})
	}
	if rep.Messages != c.Msgs || stored != c.Bytes || rep.FirstSeq != c.FirstSeq || rep.LastSeq != c.LastSeq {
		bad("the snapshot holds %d messages, %d bytes, sequences %d to %d; the manifest's cut %d messages, %d bytes, sequences %d to %d",
			rep.Messages, stored, rep.FirstSeq, rep.LastSeq, c.Msgs, c.Bytes, c.FirstSeq, c.LastSeq)
	}
	if c.From != 0 && (c.From <= c.LastSeq || c.From < sm.State.FirstSeq || c.From > sm.State.LastSeq) {
		bad("the manifest's cut leaves messages out from sequence %d, which is not after its last message %d within the state's %d to %d",
			c.From, c.LastSeq, sm.State.FirstSeq, sm.State.LastSeq)
	}
	return out
}
