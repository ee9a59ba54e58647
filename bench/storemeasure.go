package bench

import "context"

// StorePairs are the samples of one store comparison: File[i] (the file
// backend's keeper) and Store[i] (this backend's) taken one after the other.
type StorePairs struct {
	File, Store []Sample
}

// ratio is the median over the pairs of this backend's wall ÷ the file
// backend's.
func (p StorePairs) ratio() stats { return Pairs{Keeper: p.Store, Nats: p.File}.ratio() }

// StoreResult is one backend's figures against the file backend's, on the
// same kept data.
type StoreResult struct {
	Store        string // StoreNats, StoreBus or StoreS3
	Command      string // its keeper's command line (ports and secrets as names)
	Snapshot     StorePairs
	Restore      StorePairs // into an absent kept data
	AsideRestore StorePairs // with the kept data live
}

// measureStores times each backend's keeper other than file against the file
// backend's keeper, in pairs taken back to back (file, nats, file, s3, …
// in each round), for snapshot-kept, then restore-kept into an absent kept
// data, then restore-kept with the kept data live.
func (r *run) measureStores(ctx context.Context) error {
	others := r.keepers[1:]
	if len(others) == 0 {
		return nil
	}
	res := make([]StoreResult, len(others))
	for j, k := range others {
		res[j] = StoreResult{Store: k.store, Command: k.command}
	}
	phases := []struct {
		name string
		op   func(context.Context, *keeperSvc, string, int) (Sample, error)
		of   func(*StoreResult) *StorePairs
	}{
		{"snapshot", r.snapshotOp, func(s *StoreResult) *StorePairs { return &s.Snapshot }},
		{"restore", r.restoreOp, func(s *StoreResult) *StorePairs { return &s.Restore }},
		{"aside-restore", r.asideOp, func(s *StoreResult) *StorePairs { return &s.AsideRestore }},
	}
	for _, ph := range phases {
		for i := range r.cfg.Rounds {
			for j, k := range others {
				r.cfg.Log.Info("store pair", "operation", ph.name, "store", k.store, "round", i+1, "of", r.cfg.Rounds)
				f, err := ph.op(ctx, r.file(), "store-"+ph.name+"-file", i)
				if err != nil {
					return err
				}
				s, err := ph.op(ctx, k, "store-"+ph.name+"-"+k.store, i)
				if err != nil {
					return err
				}
				p := ph.of(&res[j])
				p.File, p.Store = append(p.File, f), append(p.Store, s)
			}
		}
	}
	r.res.Stores = res
	return nil
}
