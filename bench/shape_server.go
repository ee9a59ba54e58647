package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
)

// The server's own restore: the JetStream restore protocol fed from memory,
// with nothing else done on the client's side (no file read, no hash, no
// decode), so its time is the server's limit for the stream. The snapshot
// and its backup.json are the nats CLI's backup of the stream, read into
// memory before the clock starts.
const (
	rawChunk  = 1_000_000 // bytes of one chunk: the keeper's size, under the default 1 MiB max payload
	rawWindow = 4         // chunks awaiting their acknowledgement at once
	rawWait   = 2 * time.Minute
	maxRawMem = 4 << 30 // the most of a snapshot held in memory
)

// rawData is one stream's snapshot held in memory for the server's own
// restore.
type rawData struct {
	stream     string
	meta, data []byte
}

// loadRaw reads the nats CLI's backup of each of streams into memory.
func (r *run) loadRaw(streams []string) ([]rawData, error) {
	var out []rawData
	var total int64
	for _, s := range streams {
		dir := r.backupDir(s)
		meta, err := os.ReadFile(filepath.Join(dir, "backup.json"))
		if err != nil {
			return nil, fmt.Errorf("read the nats CLI's backup of %s for the server's own restore: %w", s, err)
		}
		name := filepath.Join(dir, "stream.arc.s2")
		info, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("read the nats CLI's backup of %s for the server's own restore: %w", s, err)
		}
		if total += info.Size(); total > maxRawMem {
			return nil, fmt.Errorf("the snapshots for the server's own restore pass %d bytes, more than it holds in memory", int64(maxRawMem))
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("read the nats CLI's backup of %s for the server's own restore: %w", s, err)
		}
		var cfg struct {
			Config struct {
				Name string `json:"name"`
			} `json:"config"`
		}
		if err := json.Unmarshal(meta, &cfg); err != nil || cfg.Config.Name != s {
			return nil, fmt.Errorf("the nats CLI's backup.json of %s does not name that stream (%v)", s, err)
		}
		out = append(out, rawData{stream: s, meta: meta, data: data})
	}
	return out, nil
}

// serverRestoreOp times the server's own restore of every stream in raw,
// one after the other (they must be absent), with the server's CPU.
func (r *run) serverRestoreOp(ctx context.Context, name string, raw []rawData) (Sample, error) {
	pids := r.serverPIDs()
	settle()
	before, err := cpuOf(pids)
	if err != nil {
		return Sample{}, err
	}
	rec := r.prof.start(name, r.cfg.Log, pids...)
	start := time.Now()
	for _, d := range raw {
		if err := rawRestore(ctx, r.nc, d); err != nil {
			rec.stop(ctx)
			return Sample{}, fmt.Errorf("the server's own restore of %s: %w", d.stream, err)
		}
	}
	w := time.Since(start)
	if perr := rec.stop(ctx); perr != nil {
		r.cfg.Log.Warn("profiling failed", "err", perr)
	}
	after, err := cpuOf(pids)
	if err != nil {
		return Sample{}, err
	}
	sc := sumCPU(before, after)
	return Sample{Wall: w, ServerCPU: sc.all, ServerSys: sc.sys}, nil
}

// rawRestore runs the restore protocol: the request with backup.json, the
// chunks to the subject the server names with up to rawWindow awaiting their
// acknowledgement, and the empty chunk whose reply ends the restore.
func rawRestore(ctx context.Context, nc *nats.Conn, d rawData) error {
	rctx, cancel := context.WithTimeout(ctx, rawWait)
	defer cancel()
	m, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.RESTORE."+d.stream, d.meta)
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	var start struct {
		Error          *struct{ Description string } `json:"error"`
		DeliverSubject string                        `json:"deliver_subject"`
	}
	if err := json.Unmarshal(m.Data, &start); err != nil {
		return fmt.Errorf("start: the reply is not JSON: %w", err)
	}
	if start.Error != nil || start.DeliverSubject == "" {
		return fmt.Errorf("start refused: %s", m.Data)
	}
	acks := make(chan *nats.Msg, rawWindow+1)
	inbox := nc.NewInbox()
	sub, err := nc.ChanSubscribe(inbox, acks)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	await := func() error {
		select {
		case a := <-acks:
			if len(a.Data) > 0 || a.Header.Get("Status") != "" {
				return fmt.Errorf("a chunk was refused: %s %s", a.Header.Get("Status"), a.Data)
			}
			return nil
		case <-time.After(rawWait):
			return errors.New("no acknowledgement of a chunk")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	// The first chunk waits for its acknowledgement, sent again while no
	// one listens on the subject yet (as jsbus does: seen on one server
	// too, with a stream of many consumers).
	first := d.data[:min(rawChunk, len(d.data))]
	for deadline := time.Now().Add(10 * time.Second); ; {
		a, err := nc.RequestWithContext(rctx, start.DeliverSubject, first)
		if errors.Is(err, nats.ErrNoResponders) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return fmt.Errorf("the first chunk: %w", err)
		}
		if len(a.Data) > 0 {
			return fmt.Errorf("the first chunk was refused: %s", a.Data)
		}
		break
	}
	inFlight := 0
	for off := len(first); off < len(d.data); off += rawChunk {
		if inFlight == rawWindow {
			if err := await(); err != nil {
				return err
			}
			inFlight--
		}
		if err := nc.PublishMsg(&nats.Msg{Subject: start.DeliverSubject, Reply: inbox, Data: d.data[off:min(off+rawChunk, len(d.data))]}); err != nil {
			return err
		}
		inFlight++
	}
	for ; inFlight > 0; inFlight-- {
		if err := await(); err != nil {
			return err
		}
	}
	// The end's reply comes once the server has stored every message.
	ectx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	end, err := nc.RequestWithContext(ectx, start.DeliverSubject, nil)
	if err != nil {
		return fmt.Errorf("end: %w", err)
	}
	var done struct {
		Error *struct{ Description string } `json:"error"`
	}
	if err := json.Unmarshal(end.Data, &done); err != nil || done.Error != nil {
		return fmt.Errorf("end refused: %s", end.Data)
	}
	return nil
}

// measureServerRestore times the server's own restore of the random shape's
// streams from the nats CLI's last backup of them, each after removing them
// (not timed), and checks the kept data is back whole.
func (r *run) measureServerRestore(ctx context.Context) error {
	big := []string{dataStream, kvStream}
	raw, err := r.loadRaw(big)
	if err != nil {
		return err
	}
	r.res.PhaseLoads = append(r.res.PhaseLoads, "the server's own restores: "+loadAverage())
	for i := range r.cfg.Rounds {
		r.cfg.Log.Info("the server's own restore", "round", i+1, "of", r.cfg.Rounds)
		if err := r.deleteStreams(ctx, big); err != nil {
			return err
		}
		s, err := r.serverRestoreOp(ctx, "server-restore", raw)
		if err != nil {
			return fmt.Errorf("round %d: %w", i+1, err)
		}
		if err := r.checkRestored(ctx, restoreByServer); err != nil {
			return fmt.Errorf("after the server's own restore, round %d: %w", i+1, err)
		}
		r.res.ServerRestore = append(r.res.ServerRestore, s)
	}
	return nil
}
