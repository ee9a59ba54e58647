package jsbus

import (
	"context"
	"fmt"
)

// streamNamesResponse is a page of the server's stream names.
type streamNamesResponse struct {
	Total   int      `json:"total"`
	Streams []string `json:"streams"`
}

// StreamsTaking names the streams whose subjects overlap subject, as the
// server matches them (its stream-name list filtered by subject), without
// listing every stream.
func (a *Adapter) StreamsTaking(ctx context.Context, subject string) ([]string, error) {
	if subject == "" {
		return nil, fmt.Errorf("jsbus: no subject to match streams against")
	}
	return a.namesTaking(ctx, subject)
}

// namesTaking pages through the server's stream names, of the streams
// whose subjects overlap subject.
func (a *Adapter) namesTaking(ctx context.Context, subject string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for offset, page := 0, 0; page < maxListResponses; page++ {
		var resp streamNamesResponse
		req := struct {
			Offset  int    `json:"offset"`
			Subject string `json:"subject,omitempty"`
		}{offset, subject}
		if err := a.listRequest(ctx, "$JS.API.STREAM.NAMES", req, &resp); err != nil {
			return nil, busErr(fmt.Errorf("jsbus: list stream names: %w", err))
		}
		for _, s := range resp.Streams {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		offset += len(resp.Streams)
		if len(resp.Streams) == 0 || offset >= resp.Total {
			return out, nil
		}
	}
	return nil, fmt.Errorf("jsbus: more than %d pages of stream names", maxListResponses)
}
