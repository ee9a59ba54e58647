package jsbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// streamInfoResponse is $JS.API.STREAM.INFO's reply, with the configuration
// kept as the server sent it.
type streamInfoResponse struct {
	Config  json.RawMessage `json:"config"`
	Created time.Time       `json:"created"`
	State   struct {
		Msgs        uint64   `json:"messages"`
		Bytes       uint64   `json:"bytes"`
		FirstSeq    uint64   `json:"first_seq"`
		LastSeq     uint64   `json:"last_seq"`
		NumSubjects uint64   `json:"num_subjects"`
		NumDeleted  int      `json:"num_deleted"`
		Deleted     []uint64 `json:"deleted"`
		Consumers   int      `json:"consumer_count"`
	} `json:"state"`
}

// maxDeleted bounds the deleted sequences StreamDetail takes from one
// stream: 8 bytes each in memory, some 20 in the server's JSON.
const maxDeleted = 10_000_000

// StreamDetail describes one live stream with its configuration as the
// server holds it, when it was made, and every deleted sequence inside
// its first..last (STREAM.INFO with deleted details), or returns an error
// wrapping keeper.ErrNoStream.
func (a *Adapter) StreamDetail(ctx context.Context, name string) (*keeper.StreamDetail, error) {
	if !validName(name) {
		return nil, fmt.Errorf("jsbus: %q is not a stream name: %w", name, keeper.ErrNoStream)
	}
	info, err := a.streamInfo(ctx, name, true)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Name     string   `json:"name"`
		Subjects []string `json:"subjects"`
	}
	if err := json.Unmarshal(info.Config, &cfg); err != nil || cfg.Name != name {
		return nil, fmt.Errorf("jsbus: the server described stream %s with a configuration that does not name it (%q, %v)", name, cfg.Name, err)
	}
	st := info.State
	if len(st.Deleted) > maxDeleted {
		return nil, fmt.Errorf("jsbus: stream %s has %d deleted sequences, more than the %d the keeper reads", name, len(st.Deleted), maxDeleted)
	}
	slices.Sort(st.Deleted)
	d := &keeper.StreamDetail{
		StreamInfo: keeper.StreamInfo{Name: name, Subjects: cfg.Subjects, Messages: st.Msgs, Bytes: st.Bytes,
			FirstSeq: st.FirstSeq, LastSeq: st.LastSeq, Consumers: st.Consumers, NumSubjects: st.NumSubjects},
		Config: info.Config, Deleted: slices.Compact(st.Deleted),
	}
	if !info.Created.IsZero() {
		d.Created = info.Created.UnixNano()
	}
	return d, nil
}

// streamInfo is one stream's STREAM.INFO, with its deleted sequences when
// deleted is set, tried again while the cause passes.
func (a *Adapter) streamInfo(ctx context.Context, name string, deleted bool) (*streamInfoResponse, error) {
	var info streamInfoResponse
	req := map[string]any{}
	if deleted {
		req["deleted_details"] = true
	}
	err := a.request(ctx, "$JS.API.STREAM.INFO."+name, req, &info)
	if isCode(err, codeStreamNotFound) {
		return nil, noStream(name, err)
	}
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: describe stream %s: %w", name, err))
	}
	if len(info.Config) == 0 {
		return nil, fmt.Errorf("jsbus: the server described stream %s without its configuration", name)
	}
	return &info, nil
}

// UpdateStream sets a live stream's configuration to config, with a
// STREAM.UPDATE (the stream is the one config names). An update the server
// refuses is returned with its own words and keeper.ErrConflict; a missing
// stream wraps keeper.ErrNoStream. Sending the same configuration again is
// harmless, so a try whose answer was lost is sent again.
func (a *Adapter) UpdateStream(ctx context.Context, config json.RawMessage) error {
	var cfg struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(config, &cfg); err != nil || !validName(cfg.Name) {
		return fmt.Errorf("jsbus: the stream configuration to set does not name a stream (%q, %v), so no stream was changed: %w",
			cfg.Name, err, keeper.ErrBadRequest)
	}
	var resp struct {
		Config json.RawMessage `json:"config"`
	}
	err := a.request(ctx, "$JS.API.STREAM.UPDATE."+cfg.Name, config, &resp)
	if isCode(err, codeStreamNotFound) {
		return noStream(cfg.Name, err)
	}
	var api *apiError
	if errors.As(err, &api) && !transient(err) {
		return fmt.Errorf("jsbus: the server refused to update stream %s: %w (%w)", cfg.Name, keeper.ErrConflict, err)
	}
	if err != nil {
		return busErr(fmt.Errorf("jsbus: update stream %s, which may or may not have changed: %w", cfg.Name, err))
	}
	return nil
}
