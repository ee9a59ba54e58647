package kept

import (
	"context"
	"encoding/json"
	"time"
)

// Act is one record of what the keeper did.
type Act struct {
	// ID names the act for good: set once by the keeper when the act is
	// made, it is the act's Nats-Msg-Id on every publish, so a replay
	// collapses into one message.
	ID      string          `json:"id"`
	Verb    string          `json:"verb"`             // the verb that did it
	Module  string          `json:"module,omitempty"` // the module, when the act is of one kept data
	Local   string          `json:"local,omitempty"`  // the kept data
	Caller  string          `json:"caller,omitempty"` // who asked
	Why     string          `json:"why,omitempty"`    // why
	Hand    bool            `json:"hand,omitempty"`   // a person asked for it
	What    string          `json:"what"`             // one sentence
	Outcome string          `json:"outcome"`          // "done", "failed", "planned" (a dry run), "intent" (before a removal), "rolled back" (an interrupted restore undone by recovery)
	Time    time.Time       `json:"time"`             // when (UTC), set by the keeper
	Detail  json.RawMessage `json:"detail,omitempty"` // more, as JSON, where the verb has it
	// BusIdentity is who asked as the bus says it, beside Caller, which is
	// what the request claimed (any text the caller chose). It is absent
	// in acts recorded before it was kept and in acts no request asked
	// for (recovery's).
	BusIdentity *BusIdentity `json:"bus-identity,omitempty"`
}

// Progress is reported while a long verb runs.
type Progress struct {
	Verb         string `json:"verb"`                              // the verb in progress
	Module       string `json:"module"`                            // its module
	Local        string `json:"local"`                             // its kept data
	Step         string `json:"step"`                              // "snapshot", "aside", "restore", "verify"
	Stream       string `json:"stream"`                            // the stream in progress
	StreamsDone  int    `json:"streams-done" was:"streams_done"`   // streams finished in this step
	StreamsTotal int    `json:"streams-total" was:"streams_total"` // streams in this step
	Bytes        int64  `json:"bytes"`                             // archive bytes written or read so far in this step
	// BytesTotal is what Bytes will reach when the step ends (0: not known).
	// For a snapshot it is the live streams' stored bytes, an estimate of the
	// archive; for a restore or a verification the archive's own sizes.
	BytesTotal int64 `json:"bytes-total,omitempty" was:"bytes_total"`
}

type progressKey struct{}

// WithProgress returns a context whose verbs report progress to fn. fn is
// called from the verb's goroutine and must not block for long.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ProgressFrom is the progress reporter of ctx (WithProgress), or one that
// drops what it is given.
func ProgressFrom(ctx context.Context) func(Progress) {
	if fn, ok := ctx.Value(progressKey{}).(func(Progress)); ok && fn != nil {
		return fn
	}
	return func(Progress) {}
}
