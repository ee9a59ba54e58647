package jsbus

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// upstreamRef is a mirror or source of a stream's configuration.
type upstreamRef struct {
	Name     string `json:"name"`
	External *struct {
		API string `json:"api"`
	} `json:"external"`
}

// sourcesListResponse is a page of STREAM.LIST with only the name, mirror
// and sources of each stream's configuration.
type sourcesListResponse struct {
	Total   int `json:"total"`
	Streams []struct {
		Config struct {
			Name    string        `json:"name"`
			Mirror  *upstreamRef  `json:"mirror"`
			Sources []upstreamRef `json:"sources"`
		} `json:"config"`
	} `json:"streams"`
	Missing []string          `json:"missing"`
	Offline map[string]string `json:"offline"`
}

// Downstreams lists every stream of the adapter's JetStream (its account,
// in its domain) whose mirror or one of whose sources names one of
// streams, from the server's stream list, page by page, sorted by stream
// and upstream. A mirror or source counts when it is in this JetStream: no
// external API prefix (the server refuses $JS.API as one), or
// $JS.<domain>.API of the adapter's domain. Another domain's or account's
// stream of the same name is not the one restored and is left out, and so
// are streams of other domains or accounts that mirror or source these
// (they are not in this list). A stream whose server did not answer the list (offline, or no
// leader) cannot be read and is named in a warning.
func (a *Adapter) Downstreams(ctx context.Context, streams []string) ([]keeper.Downstream, error) {
	want := map[string]bool{}
	for _, s := range streams {
		want[s] = true
	}
	var out []keeper.Downstream
	seen, unread := map[keeper.Downstream]bool{}, map[string]bool{}
	add := func(stream, kind string, up upstreamRef) {
		d := keeper.Downstream{Stream: stream, Kind: kind, Upstream: up.Name}
		if want[up.Name] && a.ownUpstream(up) && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for offset, page := 0, 0; ; page++ {
		if page >= maxListResponses {
			return nil, fmt.Errorf("jsbus: list the streams that mirror or source %s: more than %d pages", strings.Join(streams, ", "), maxListResponses)
		}
		var resp sourcesListResponse
		if err := a.listRequest(ctx, "$JS.API.STREAM.LIST", map[string]int{"offset": offset}, &resp); err != nil {
			return nil, busErr(fmt.Errorf("jsbus: list the streams that mirror or source %s: %w", strings.Join(streams, ", "), err))
		}
		for _, s := range resp.Streams {
			if m := s.Config.Mirror; m != nil {
				add(s.Config.Name, "mirror", *m)
			}
			for _, src := range s.Config.Sources {
				add(s.Config.Name, "source", src)
			}
		}
		for _, name := range append(slices.Collect(maps.Keys(resp.Offline)), resp.Missing...) {
			unread[name] = true
		}
		n := len(resp.Streams) + len(resp.Offline) + len(resp.Missing)
		if offset += n; n == 0 || offset >= resp.Total {
			break
		}
	}
	if len(unread) > 0 {
		a.log.Warn("some streams did not answer the stream list (offline, or no leader), so whether they mirror or source a restored stream is not known",
			"streams", slices.Sorted(maps.Keys(unread)))
	}
	slices.SortFunc(out, func(x, y keeper.Downstream) int {
		return cmp.Or(strings.Compare(x.Stream, y.Stream), strings.Compare(x.Upstream, y.Upstream), strings.Compare(x.Kind, y.Kind))
	})
	return out, nil
}

// ownUpstream reports whether a mirror or source is in the adapter's own
// JetStream (see Downstreams).
func (a *Adapter) ownUpstream(up upstreamRef) bool {
	if up.External == nil {
		return true
	}
	api := strings.TrimSuffix(up.External.API, ".")
	return api == "" || (a.cfg.domain != "" && api == "$JS."+a.cfg.domain+".API")
}
