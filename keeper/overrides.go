package keeper

import (
	"bytes"
	"fmt"
	"io"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// maxMetaRead bounds the backup.json a restore with overrides reads whole.
const maxMetaRead = 1 << 20

// overridden is one stream's data and backup.json as a restore with
// overrides sends them: backup.json with the stream's replicas and
// placement changed, and the data with the consumers whose own replicas are
// over the new stream's lowered to it. Without overrides both are as they
// are. The data returned must be read to its end or closed.
func overridden(ov *Overrides, data, meta io.Reader) (io.ReadCloser, io.Reader, error) {
	if ov == nil {
		return io.NopCloser(data), meta, nil
	}
	mj, err := io.ReadAll(io.LimitReader(meta, maxMetaRead+1))
	if err != nil {
		return nil, nil, err
	}
	if len(mj) > maxMetaRead {
		return nil, nil, fmt.Errorf("backup.json is over %d bytes", maxMetaRead)
	}
	if mj, err = busarchive.OverrideConfig(mj, ov.Replicas, ov.Cluster, ov.Tags); err != nil {
		return nil, nil, err
	}
	if ov.Replicas > 0 {
		return busarchive.CapConsumerReplicas(data, ov.Replicas), bytes.NewReader(mj), nil
	}
	return io.NopCloser(data), bytes.NewReader(mj), nil
}

// checkReplicasFit refuses, before anything is touched, a restore of a
// stream with more than one replica (its own, or the overrides') into a
// server that is not clustered: the server would refuse it (10074) only
// once the live data was removed.
func (k *Keeper) checkReplicasFit(a *openedArchive, streams []string, ov *Overrides) error {
	if k.bus.Clustered() {
		return nil
	}
	for _, s := range streams {
		want := 0
		if ov != nil {
			want = ov.Replicas
		}
		if want == 0 {
			m, err := a.StreamMeta(s)
			if err != nil {
				return err
			}
			mj, err := io.ReadAll(io.LimitReader(m, maxMetaRead))
			m.Close()
			if err != nil {
				return err
			}
			if want, err = busarchive.ConfigReplicas(mj); err != nil {
				return fmt.Errorf("stream %s: %w", s, err)
			}
		}
		if want > 1 {
			return Errorf(ErrBadRequest, "stream %s would be restored with %d replicas, and the server the keeper is connected to is not clustered, so it would refuse it; restore with replicas 1 (nats-keeper restore-kept --replicas 1)", s, want)
		}
	}
	return nil
}

// overridesSaid is the sentence a restore's reply adds for its overrides.
func (pl *restorePlan) overridesSaid() string {
	if pl.Overrides == nil {
		return ""
	}
	return fmt.Sprintf(" The restored streams' configuration was changed: %s.", pl.Overrides)
}
