package jsbus

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// LiveKeys lists the keys of the index that begin with prefix and hold a
// value, sorted, as Keys does, but in one request for thousands of keys
// instead of a watcher that delivers each: the index stream's info with its
// subjects under the prefix, each with how many messages it holds. A key
// with one message holds its value: the keeper removes index keys with
// delete markers, so a removed key holds its put and the marker at least.
// A key with more (replaced, or removed) is read to tell which, with
// GetMany. (A key purged by hand, outside the keeper, holds one purge marker
// and is listed; reading it then finds no value.) A prefix that is not
// whole tokens ending with "." is listed with Keys.
func (a *Adapter) LiveKeys(ctx context.Context, prefix string) ([]string, error) {
	if !strings.HasSuffix(prefix, ".") || !validKeyPrefix(prefix) {
		return a.Keys(ctx, prefix)
	}
	var counts map[string]uint64
	err := a.retry(ctx, "list the keys of the index", func(ctx context.Context) (err error) {
		counts, err = a.subjectCounts(ctx, prefix)
		return err
	})
	if err != nil {
		return nil, busErr(fmt.Errorf("jsbus: list the keys of the index %s: %w", a.cfg.bucket, err))
	}
	keys := make([]string, 0, len(counts))
	var unsure []string
	for k, n := range counts {
		if n == 1 {
			keys = append(keys, k)
		} else {
			unsure = append(unsure, k)
		}
	}
	if len(unsure) > 0 {
		live, err := a.GetMany(ctx, unsure)
		if err != nil {
			return nil, err
		}
		for k := range live {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// subjectCounts is one try of LiveKeys' stream info: every key under
// prefix with the messages its subject holds, over the server's pages of
// subjects.
func (a *Adapter) subjectCounts(ctx context.Context, prefix string) (map[string]uint64, error) {
	subjectPrefix := a.keySubject("")
	counts := map[string]uint64{}
	for offset := 0; ; {
		var resp struct {
			Total  int `json:"total"`
			Offset int `json:"offset"`
			State  struct {
				Subjects map[string]uint64 `json:"subjects"`
			} `json:"state"`
		}
		req := map[string]any{"subjects_filter": subjectPrefix + prefix + ">", "offset": offset}
		if err := a.requestOnce(ctx, "$JS.API.STREAM.INFO.KV_"+a.cfg.bucket, req, &resp); err != nil {
			return nil, err
		}
		for s, n := range resp.State.Subjects {
			if k, ok := strings.CutPrefix(s, subjectPrefix); ok && strings.HasPrefix(k, prefix) {
				counts[k] = n
			}
		}
		if len(counts) > maxKeys {
			return nil, fmt.Errorf("the index holds more than %d keys under %q", maxKeys, prefix)
		}
		offset += len(resp.State.Subjects)
		if len(resp.State.Subjects) == 0 || offset >= resp.Total {
			return counts, nil
		}
	}
}
