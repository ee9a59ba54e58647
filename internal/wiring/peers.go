package wiring

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/verbs"
)

// peerWait is how long a starting keeper listens for the other keepers'
// service info.
const peerWait = time.Second

// peerQuiet ends the listening once no more infos came for this long.
const peerQuiet = 200 * time.Millisecond

// maxPeers bounds the infos a starting keeper reads.
const maxPeers = 256

// Metadata keys the keeper announces, besides verbs' prefix and store.
const (
	metaDomain   = "js-domain" // the JetStream domain it reaches; "" for the connected server's
	metaIndex    = "index"     // its index bucket
	metaConflict = "conflict"  // set when another keeper answers its prefix with another domain or index
)

// otherKeepers asks every nats-keeper for its info ($SRV.INFO.nats-keeper)
// and says, one sentence each, which answer on prefix but keep another
// JetStream domain or index: their verbs and this keeper's share the same
// subjects (and, across a leafnode, the same queue group), so a caller
// reaches either at random. A keeper that cannot ask says nothing.
func otherKeepers(nc *nats.Conn, prefix, domain, bucket string, log *slog.Logger) []string {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return nil
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$SRV.INFO."+verbs.ServiceName, inbox, nil); err != nil {
		log.Debug("could not ask the other keepers for their info", "err", err)
		return nil
	}
	var out []string
	end := time.Now().Add(peerWait)
	wait := peerWait
	for range maxPeers {
		m, err := sub.NextMsg(min(wait, time.Until(end)))
		if err != nil || m.Header.Get("Status") == "503" { // 503: no keeper subscribed, said at once
			break
		}
		wait = peerQuiet // the others answer about together
		var info micro.Info
		if json.Unmarshal(m.Data, &info) != nil || info.Metadata["prefix"] != prefix {
			continue
		}
		theirs, ok := info.Metadata[metaDomain]
		if !ok {
			continue // a keeper from before domains: it says nothing of its domain
		}
		index := cmp.Or(info.Metadata[metaIndex], DefaultBucket)
		if theirs != domain || index != bucket {
			out = append(out, fmt.Sprintf("keeper %s answers on %s.<verb> too, but keeps JetStream domain %s and index %s (this one: domain %s, index %s)",
				info.ID, prefix, domainName(theirs), index, domainName(domain), bucket))
		}
	}
	slices.Sort(out)
	return out
}

func domainName(d string) string {
	if d == "" {
		return `"" (the connected server's)`
	}
	return d
}

// peerOptions are the service metadata of the keeper's domain and index,
// and, when otherKeepers found any, the conflict, which it also logs.
func peerOptions(nc *nats.Conn, prefix, domain, bucket string, log *slog.Logger) []verbs.ServeOption {
	opts := []verbs.ServeOption{verbs.WithMetadata(metaDomain, domain), verbs.WithMetadata(metaIndex, bucket)}
	others := otherKeepers(nc, prefix, domain, bucket, log)
	if len(others) == 0 {
		return opts
	}
	said := strings.Join(others, "; ") + ". Callers of this prefix reach either keeper at random: give each domain's keeper its own --prefix"
	log.Warn("another keeper answers this keeper's prefix with another JetStream domain or index", "prefix", prefix, "said", said)
	return append(opts, verbs.WithMetadata(metaConflict, said))
}
