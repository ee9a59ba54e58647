package keeper

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"
)

func leaseKey(module, local string) string { return "lease." + module + "." + local }

// errLeaseLost is the cause of the end of a verb's context (lock) when one
// of its leases was lost: another keeper judged it lapsed and may hold the
// kept data now, and write where this verb writes.
var errLeaseLost = errors.New("the verb's lease was lost: another keeper judged it lapsed and may hold the kept data now")

// leaseLost reports whether ctx, a verb's (lock), ended because a lease
// was lost.
func leaseLost(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errLeaseLost) }

// Stream leases: lease-stream.<name> for a stream whose name is a plain KV
// token, lease-streamx.<hex of the name> for any other.
const (
	streamLeasePrefix    = "lease-stream."
	streamLeaseHexPrefix = "lease-streamx."
)

// streamLeaseKey is the lease of one stream. Two kept data whose bus names
// collide (shop/a_b and shop_a/b are both stream shop_a_b), or whose plans
// name the same stream, take the same stream lease, so their verbs never
// interleave on it.
func streamLeaseKey(stream string) string {
	for _, r := range stream {
		if !plainRune(r) {
			return streamLeaseHexPrefix + hex.EncodeToString([]byte(stream))
		}
	}
	return streamLeasePrefix + stream
}

// leaseName is what a lease key holds, for sentences.
func leaseName(key string) string {
	switch {
	case strings.HasPrefix(key, streamLeasePrefix):
		return "stream " + strings.TrimPrefix(key, streamLeasePrefix)
	case strings.HasPrefix(key, streamLeaseHexPrefix):
		b, _ := hex.DecodeString(strings.TrimPrefix(key, streamLeaseHexPrefix))
		return "stream " + string(b)
	case strings.HasPrefix(key, "lease-sched."):
		return "the schedule of " + strings.Replace(strings.TrimPrefix(key, "lease-sched."), ".", "/", 1)
	}
	return strings.Replace(strings.TrimPrefix(key, "lease."), ".", "/", 1)
}

// lease is the value of lease.<module>.<local> in the index: which keeper
// runs which verb on the kept data, for whom, since and until when.
type lease struct {
	Holder  string    `json:"holder"`
	Verb    string    `json:"verb"`
	Kept    string    `json:"kept,omitempty"` // module/local the verb runs on
	Caller  string    `json:"caller,omitempty"`
	Since   time.Time `json:"since"`
	Expires time.Time `json:"expires"`
}

// takeLease takes the lease key in the index for verb on r's kept data,
// create-only, or takes over a lease whose holder let it expire. It renews
// the lease until the returned release is called; if the lease is lost,
// lost is closed.
func (k *Keeper) takeLease(ctx context.Context, key, verb string, r Request) (release func(), lost <-chan struct{}, err error) {
	now := k.now().UTC()
	l := lease{Holder: k.id, Verb: verb, Kept: r.Module + "/" + r.Local, Caller: r.Caller, Since: now, Expires: now.Add(k.leaseTTL)}
	data, _ := json.Marshal(l)
	rev, err := k.index.Create(ctx, key, data)
	if errors.Is(err, ErrExists) {
		rev, err = k.takeOver(ctx, key, data)
	}
	if err != nil {
		return nil, nil, err
	}
	k.leases.n.Add(1)
	stopc := make(chan struct{})
	lostc := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(k.leaseTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stopc:
				return
			case <-t.C:
				l.Expires = k.now().UTC().Add(k.leaseTTL)
				data, _ := json.Marshal(l)
				mu.Lock()
				n, err := k.index.Update(context.WithoutCancel(ctx), key, data, rev)
				if err == nil {
					rev = n
				}
				mu.Unlock()
				if errors.Is(err, ErrRevision) {
					k.log.Error("lost the lease on a kept data while a verb ran", "key", key, "verb", verb)
					close(lostc)
					return
				}
				if err != nil {
					k.log.Warn("could not renew a lease; trying again", "key", key, "err", err)
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			defer k.leases.n.Add(-1)
			close(stopc)
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if err := k.index.DeleteRev(context.WithoutCancel(ctx), key, rev); err != nil {
				k.log.Warn("could not release a lease; it expires by itself", "key", key, "err", err)
			}
		})
	}, lostc, nil
}

// takeOver replaces an expired lease, or says who holds a live one.
func (k *Keeper) takeOver(ctx context.Context, key string, data []byte) (uint64, error) {
	cur, rev, err := k.index.GetRev(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return k.index.Create(ctx, key, data) // released meanwhile
	}
	if err != nil {
		return 0, err
	}
	var l lease
	if err := json.Unmarshal(cur, &l); err == nil && k.now().Before(l.Expires) {
		who := l.Caller
		if who == "" {
			who = "an unnamed caller"
		}
		of := ""
		if l.Kept != "" && strings.HasPrefix(key, "lease-") {
			of = " of " + l.Kept
		}
		return 0, heldBy(l.Caller, Errorf(ErrBusy, "%s is held by keeper %s running %s%s for %s since %s (lease until %s)",
			leaseName(key), l.Holder, l.Verb, of, who, l.Since.Format(time.RFC3339), l.Expires.Format(time.RFC3339)))
	}
	k.log.Warn("taking over an expired lease", "key", key, "holder", l.Holder, "expired", l.Expires)
	n, err := k.index.Update(ctx, key, data, rev)
	if errors.Is(err, ErrRevision) {
		return 0, Errorf(ErrBusy, "%s was just taken by another keeper", leaseName(key))
	}
	return n, err
}

// leaseLive reports whether another keeper holds a live lease on the kept data.
func (k *Keeper) leaseLive(ctx context.Context, module, local string) bool {
	cur, _, err := k.index.GetRev(ctx, leaseKey(module, local))
	if err != nil {
		return false
	}
	var l lease
	return json.Unmarshal(cur, &l) == nil && k.now().Before(l.Expires)
}

// releaseDeadLeases removes the leases that keepers on this host held when
// they died: a lease names its holder host:pid:…, and a holder on this host
// whose process is gone will never release it. Leases of other hosts are left
// to expire.
func (k *Keeper) releaseDeadLeases(ctx context.Context) {
	host, pid, ok := parseHolder(k.id)
	if !ok {
		return
	}
	var keys []string
	for _, prefix := range []string{"lease.", streamLeasePrefix, streamLeaseHexPrefix, "lease-sched."} {
		ks, err := k.index.Keys(ctx, prefix)
		if err != nil {
			return
		}
		keys = append(keys, ks...)
	}
	for _, key := range keys {
		cur, rev, err := k.index.GetRev(ctx, key)
		if err != nil {
			continue
		}
		var l lease
		if json.Unmarshal(cur, &l) != nil {
			continue
		}
		h, p, ok := parseHolder(l.Holder)
		if !ok || h != host || p == pid || processAlive(p) {
			continue
		}
		if err := k.index.DeleteRev(ctx, key, rev); err == nil {
			k.log.Warn("released the lease of a keeper that died on this host", "key", key, "holder", l.Holder, "verb", l.Verb)
		}
	}
}

// parseHolder splits a keeper id host:pid:suffix.
func parseHolder(id string) (host string, pid int, ok bool) {
	parts := strings.Split(id, ":")
	if len(parts) != 3 {
		return "", 0, false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return "", 0, false
	}
	return parts[0], pid, true
}
