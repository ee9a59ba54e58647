package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-keeper/nats-keeper/verbs"
)

// keeperSvc is one `nats-keeper serve` process, the client that sends it
// verbs, and the store it keeps its points and asides in.
type keeperSvc struct {
	store   string // backend: StoreFile, StoreNats, …
	command string // its command line as the report shows it
	proc    *proc  // the keeper
	client  *verbs.Client
	side    *proc // the store's own server (the vault's nats-server, versitygw); nil for file and bus
}

// keeperSpec is what a keeper of a backend other than file is started
// with: its store flags and environment, and how the report shows them
// (ports and secrets as names).
type keeperSpec struct {
	store           string
	args, shownArgs []string
	env, shownEnv   []string
	side            *proc
}

// startKeeper starts a keeper for spec.store and waits until it answers
// list-kept. The file keeper keeps the default prefix and index; each other
// has its own, so the keepers on the one bus keep apart.
func (r *run) startKeeper(ctx context.Context, bin string, spec keeperSpec) (*keeperSvc, error) {
	dir, prefix, name := filepath.Join(r.work, "keeper"), verbs.DefaultPrefix, "nats-keeper serve"
	a := []string{"serve", "--server", r.url, "--dir", dir, "--log-level", "debug"}
	shown := "--server " + r.shownURL() + " --dir DIR --log-level debug"
	if spec.store != StoreFile {
		dir, prefix, name = filepath.Join(r.work, "keeper-"+spec.store), "keeper-"+spec.store, "nats-keeper serve ("+spec.store+")"
		bucket := "kept_" + spec.store
		a = append([]string{"serve", "--server", r.url, "--dir", dir, "--prefix", prefix, "--bucket", bucket, "--log-level", "debug"}, spec.args...)
		shown = fmt.Sprintf("--server nats://127.0.0.1:PORT --dir DIR-%s --prefix %s --bucket %s --log-level debug %s",
			spec.store, prefix, bucket, strings.Join(spec.shownArgs, " "))
	}
	p, err := startProc(name, slices.Concat(r.env, r.cfg.KeeperEnv, spec.env), bin, a...)
	if err != nil {
		return nil, err
	}
	k := &keeperSvc{store: spec.store, proc: p, side: spec.side,
		client:  verbs.NewClient(r.nc, verbs.WithPrefix(prefix), verbs.WithTimeout(time.Hour)),
		command: strings.TrimSpace(strings.Join(slices.Concat(r.cfg.KeeperEnv, spec.shownEnv), " ") + " nats-keeper serve " + shown)}
	r.keepers = append(r.keepers, k)
	for deadline := time.Now().Add(time.Minute); ; {
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := k.client.ListKept(lctx, keeperRequest(module, local, 0, ""))
		cancel()
		if err == nil {
			return k, nil
		}
		if !p.running() || time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("the %s keeper did not answer list-kept (%v); its log:\n%s", spec.store, err, p.tail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// file is the file backend's keeper, the one of the nats CLI comparison.
func (r *run) file() *keeperSvc { return r.keepers[0] }
