package keeper

import (
	"encoding/json"

	"github.com/nats-keeper/nats-keeper/kept"
)

// encodeHead is the head of j as the index holds it: every field but the
// body, which "reposition" names (j.body), or holds itself when the
// journal has no body in parts (none to set back, or an older journal not
// yet saved again).
func encodeHead(j *journal) []byte {
	h := struct {
		*journalShape
		Format     int               `json:"format"`
		Reposition any               `json:"reposition"`
		Expect     []ConsumerFigures `json:"expect,omitempty"`
	}{journalShape: (*journalShape)(j), Format: JournalFormat}
	if len(j.Delta) > 0 || j.kind() == KindLogical {
		h.Format = JournalFormatDelta // a keeper before it would misread it
	}
	switch {
	case j.body != nil:
		h.Reposition = j.body
	case j.Reposition == nil:
		h.Reposition, h.Expect = []Position{}, j.Expect
	default:
		ps, _ := kept.MarshalOldKeys(j.Reposition)
		h.Reposition, h.Expect = json.RawMessage(ps), j.Expect
	}
	// The journal is written as the release before wrote it, with the old
	// keys only: its format does not change with the wire casing, and
	// either release reads it (kept.MarshalOldKeys).
	data, _ := kept.MarshalOldKeys(&h)
	return data
}
