package keeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// VerbSchedule is what the acts of scheduled points are recorded as
// (<prefix>.acts.schedule): a point taken on schedule is a snapshot-kept
// act; a scheduled point that could not be taken is a schedule act with
// outcome "failed". It is no verb on the wire.
const VerbSchedule = "schedule"

// schedLeaseKey is the lease a keeper holds while it takes a kept data's
// due point: a second keeper finds it held, or finds the point taken.
func schedLeaseKey(module, local string) string { return "lease-sched." + module + "." + local }

// Schedules lists the schedules of the kept data of module/local (either
// may be empty): each policy.<module>.<local> with every, and, for each kept
// data with points and no policy of its own, policy.default when it has
// every. Due, NextDue, Newest and Taken are read at the keeper's now.
func (k *Keeper) Schedules(ctx context.Context, module, local string) ([]Scheduled, error) {
	keys, err := k.index.Keys(ctx, scopePrefix("policy", module, local))
	if err != nil {
		return nil, Errorf(ErrNoBus, "listing the policies in the index: %w", err)
	}
	own := map[[2]string]bool{}
	var out []Scheduled
	for _, key := range keys {
		parts := strings.Split(strings.TrimPrefix(key, "policy."), ".")
		if len(parts) != 2 || (local != "" && parts[1] != local) {
			continue
		}
		own[[2]string{parts[0], parts[1]}] = true
		if s, ok := k.scheduleOf(ctx, key, parts[0], parts[1]); ok {
			out = append(out, s)
		}
	}
	kept, err := k.keptWithPoints(ctx, module, local)
	if err != nil {
		return nil, err
	}
	for _, kd := range kept {
		if own[kd] {
			continue
		}
		if s, ok := k.scheduleOf(ctx, policyDefault, kd[0], kd[1]); ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// scheduleOf reads the policy at key and, when it has every, the schedule
// it gives module/local now. A policy that cannot be read is logged and
// schedules nothing.
func (k *Keeper) scheduleOf(ctx context.Context, key, module, local string) (Scheduled, bool) {
	data, err := k.index.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, ErrNotFound) {
			k.log.Warn("a policy could not be read, so its schedule is not known now", "key", key, "err", err)
		}
		return Scheduled{}, false
	}
	var p Policy
	if err := json.Unmarshal(data, &p); err != nil || p.Every == "" {
		return Scheduled{}, false
	}
	sched, err := p.Schedule()
	if err != nil {
		k.log.Warn("a policy's schedule is not readable, so no point is taken by it", "key", key, "every", p.Every, "err", err)
		return Scheduled{}, false
	}
	now := k.now()
	s := Scheduled{Module: module, Local: local, Policy: key, Every: p.Every, TimeZone: p.TimeZone, Form: p.Form,
		Interval: sched.Interval(now)}
	s.Due, _ = sched.Prev(now)
	s.NextDue, _ = sched.Next(now)
	points, err := k.indexPoints(ctx, module, local)
	if err != nil {
		k.log.Warn("the points of a scheduled kept data could not be read", "kept", module+"/"+local, "err", err)
		return s, true
	}
	for _, pt := range points {
		if !strings.HasPrefix(pt.Fingerprint, ScheduledPrefix) {
			continue
		}
		if s.Newest == nil || pt.Taken.After(*s.Newest) {
			at := pt.Taken
			s.Newest = &at
		}
		if !s.Due.IsZero() && pt.Form == s.Form && pt.Fingerprint == s.Fingerprint() {
			s.Taken = true
		}
	}
	return s, true
}

// ErrScheduleHeld is TakeScheduled's answer when another keeper holds the
// kept data's schedule lease: it is taking the due point.
var ErrScheduleHeld = errors.New("another keeper is taking this scheduled point")

// TakeScheduled takes the point due at s.Due, under the kept data's
// schedule lease, unless the index already holds it (then it returns nil
// and taken false), and then prunes the kept data by its recorded policy.
// A point that could not be taken is recorded as a schedule act with
// outcome "failed", and its error returned.
func (k *Keeper) TakeScheduled(ctx context.Context, s Scheduled) (taken bool, err error) {
	if s.Due.IsZero() || s.Taken {
		return false, nil
	}
	why := fmt.Sprintf("due at %s by %s (every %s)", s.Due.UTC().Format(time.RFC3339), s.Policy, s.Every)
	r := Request{Module: s.Module, Local: s.Local, Form: s.Form, Fingerprint: s.Fingerprint(),
		Caller: "nats-keeper schedule", Why: why}
	release, _, err := k.takeLease(ctx, schedLeaseKey(s.Module, s.Local), VerbSchedule, r)
	if errors.Is(err, ErrBusy) {
		return false, ErrScheduleHeld
	}
	if err != nil {
		return false, k.scheduleFailed(ctx, r, fmt.Errorf("taking the schedule lease: %w", err))
	}
	defer release()
	if _, err := k.index.Get(ctx, pointKey(r.Module, r.Local, r.Form, r.Fingerprint)); err == nil {
		return false, nil // another keeper took it meanwhile
	}
	if _, err := k.SnapshotKept(ctx, r); err != nil {
		return false, k.scheduleFailed(ctx, r, err)
	}
	rep, err := k.prune(ctx, Request{Module: s.Module, Local: s.Local, Caller: r.Caller,
		Why: "the retention policy, after the scheduled point " + r.Fingerprint}, false)
	var none *noPolicy
	switch {
	case errors.As(err, &none):
	case err != nil:
		k.log.Error("the prune after a scheduled point failed", "kept", s.Module+"/"+s.Local, "err", err)
	default:
		k.log.Info("pruned after a scheduled point", "kept", s.Module+"/"+s.Local, "said", rep.Said)
	}
	return true, nil
}

// scheduleFailed records a schedule act with outcome "failed" and returns
// err, said with the point it was to be.
func (k *Keeper) scheduleFailed(ctx context.Context, r Request, err error) error {
	err = fmt.Errorf("the scheduled point %s/%s f%d-%s (%s) was not taken: %w", r.Module, r.Local, r.Form, r.Fingerprint, r.Why, err)
	act := Act{Verb: VerbSchedule, Module: r.Module, Local: r.Local, Caller: r.Caller, Why: r.Why, What: err.Error(), Outcome: "failed"}
	if rerr := k.record(context.WithoutCancel(ctx), act); rerr != nil {
		k.log.Error("the act of a failed scheduled point could not be recorded", "err", rerr)
	}
	return err
}

// listSchedules adds the schedules of what r lists to its list-kept reply.
// Schedules that cannot be read are logged and left out: the listing
// stands without them.
func (k *Keeper) listSchedules(ctx context.Context, r Request, rep *Reply) {
	scheds, err := k.Schedules(ctx, r.Module, r.Local)
	if err != nil {
		k.log.Warn("the schedules could not be read for list-kept", "err", err)
		return
	}
	rep.Schedules = scheds
}
