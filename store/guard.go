package store

import "fmt"

// WriteGuard is the state every Writer keeps the same way, and its checks:
// the first failure (after it the writer refuses everything), whether it was
// committed or aborted, and the range Hold keeps. A Writer embeds it and
// calls Usable before taking bytes, CheckHold in Hold and CheckWriteAt in
// WriteAt.
type WriteGuard struct {
	Key              string
	Err              error // the first failure
	Committed        bool
	Aborted          bool
	Holding          bool
	HoldOff, HoldEnd int64
}

// Usable is nil while the writer takes bytes, or why it does not.
func (g *WriteGuard) Usable() error {
	switch {
	case g.Err != nil:
		return g.Err
	case g.Committed:
		return fmt.Errorf("%s was already committed, so nothing more was written", g.Key)
	case g.Aborted:
		return fmt.Errorf("%s was aborted, so nothing was written", g.Key)
	}
	return nil
}

// Fail records the writer's first failure and returns it.
func (g *WriteGuard) Fail(err error) error {
	if g.Err == nil {
		g.Err = err
	}
	return g.Err
}

// CheckHold begins holding the n bytes at off, or records why not: a range
// already held, a negative one, one over most bytes, or one that begins
// before from (bytes the writer no longer has).
func (g *WriteGuard) CheckHold(off, n, from, most int64) error {
	switch {
	case g.Holding:
		return g.Fail(fmt.Errorf("holding %d bytes at %d of %s while %d..%d is still held: at most one range is held at a time, so the object can no longer be committed", n, off, g.Key, g.HoldOff, g.HoldEnd))
	case off < 0 || n < 0:
		return g.Fail(fmt.Errorf("holding %d bytes at %d of %s: a negative offset or length, so the object can no longer be committed", n, off, g.Key))
	case n > most:
		return g.Fail(fmt.Errorf("holding %d bytes at %d of %s: a held range may take at most %d bytes, so the object can no longer be committed", n, off, g.Key, most))
	case off < from:
		return g.Fail(fmt.Errorf("holding %d bytes at %d of %s: the bytes before %d were already handed over, so the object can no longer be committed", n, off, g.Key, from))
	}
	g.Holding, g.HoldOff, g.HoldEnd = true, off, off+n
	return nil
}

// StartWriteAt is the start of every WriteAt of n bytes at off, size bytes
// having been written: an error when the writer refuses them (see Usable
// and CheckWriteAt), else whether there is anything to write.
func (g *WriteGuard) StartWriteAt(n int, off, size int64) (bool, error) {
	if err := g.Usable(); err != nil {
		return false, err
	}
	if n == 0 {
		return false, nil
	}
	if err := g.CheckWriteAt(n, off, size); err != nil {
		return false, err
	}
	return true, nil
}

// CheckWriteAt records why n bytes at off may not be rewritten, size bytes
// having been written: only bytes written and held may.
func (g *WriteGuard) CheckWriteAt(n int, off, size int64) error {
	end := off + int64(n)
	switch {
	case !g.Holding:
		return g.Fail(fmt.Errorf("writing %d bytes at %d into %s, with no range held: only held bytes can be rewritten, so the object can no longer be committed", n, off, g.Key))
	case off < g.HoldOff || end > g.HoldEnd:
		return g.Fail(fmt.Errorf("writing %d..%d into %s, outside the held %d..%d, so the object can no longer be committed", off, end, g.Key, g.HoldOff, g.HoldEnd))
	case end > size:
		return g.Fail(fmt.Errorf("writing %d..%d into %s, beyond the %d bytes written, so the object can no longer be committed", off, end, g.Key, size))
	}
	return nil
}
