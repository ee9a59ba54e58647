package jsbus

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
)

// maxMultiLast is how many subjects nats-server answers in one direct get of
// the last messages of several subjects (its getDirectMulti's
// maxAllowedResponses); more is refused with 413.
const maxMultiLast = 1024

// GetMany returns the values of the keys that hold one, in one direct get
// of the index's stream per maxMultiLast keys, instead of one request per
// key: a list-kept page of a thousand records costs one round trip, not a
// thousand. A missing or deleted key is absent from the map.
func (a *Adapter) GetMany(ctx context.Context, keys []string) (map[string][]byte, error) {
	out := make(map[string][]byte, len(keys))
	for start := 0; start < len(keys); start += maxMultiLast {
		batch := keys[start:min(len(keys), start+maxMultiLast)]
		err := a.retry(ctx, fmt.Sprintf("read %d records of the index", len(batch)), func(ctx context.Context) error {
			return a.getManyOnce(ctx, batch, out)
		})
		if err != nil {
			return nil, busErr(fmt.Errorf("jsbus: read %d records of the index %s: %w", len(batch), a.cfg.bucket, err))
		}
	}
	return out, nil
}

// getManyOnce is one try of one batch of GetMany.
func (a *Adapter) getManyOnce(ctx context.Context, keys []string, out map[string][]byte) error {
	prefix := a.keySubject("")
	subjects := make([]string, len(keys))
	for i, k := range keys {
		if !validIndexKey(k) {
			return fmt.Errorf("%q is not an index key", k)
		}
		subjects[i] = prefix + k
	}
	body, err := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		Batch     int      `json:"batch"`
	}{subjects, len(subjects)})
	if err != nil {
		return err
	}
	inbox := a.nc.NewInbox()
	sub, err := a.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	if err := sub.SetPendingLimits(2*maxMultiLast, 2*indexMaxValue*4); err != nil {
		return err
	}
	if err := a.nc.PublishRequest(a.api("$JS.API.DIRECT.GET.KV_"+a.cfg.bucket), inbox, body); err != nil {
		return err
	}
	got := map[string][]byte{}
	for range len(subjects) + 1 {
		wctx, cancel := context.WithTimeout(ctx, a.cfg.attempt)
		m, err := sub.NextMsgWithContext(wctx)
		cancel()
		if err != nil {
			return err
		}
		switch status := m.Header.Get("Status"); {
		case strings.HasPrefix(status, "404"): // none of them holds a value
			return nil
		case strings.HasPrefix(status, "204"): // the end of the batch
			for k, v := range got {
				out[k] = v
			}
			return nil
		case status == "503":
			return nats.ErrNoResponders
		case status != "":
			return fmt.Errorf("the server answered the direct get with %s %s", status, m.Header.Get("Description"))
		}
		key, ok := strings.CutPrefix(m.Header.Get("Nats-Subject"), prefix)
		if !ok {
			return fmt.Errorf("the direct get answered with subject %q, not one asked for", m.Header.Get("Nats-Subject"))
		}
		if op := m.Header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
			continue
		}
		got[key] = m.Data
	}
	return fmt.Errorf("the direct get of %d records sent more messages than asked for", len(subjects))
}

// validIndexKey reports whether k can be named in a subject: tokens of
// the characters a KV key may hold, no wildcard.
func validIndexKey(k string) bool { return validTokens(k, 1024) }
