package busarchive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/nats-server/v2/server/archive"
)

// OverrideConfig returns backup.json (meta) with the stream's replicas
// (when replicas > 0) and its placement (when cluster or tags are given:
// they replace the whole placement, as `nats backup restore --cluster
// --tag` does) changed, and every other field as it was. It is what a
// restore with overrides sends the server.
func OverrideConfig(meta []byte, replicas int, cluster string, tags []string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(meta, &doc); err != nil {
		return nil, fmt.Errorf("backup.json does not decode: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(doc["config"], &cfg); err != nil || cfg == nil {
		return nil, errors.New("backup.json holds no stream config")
	}
	if replicas > 0 {
		cfg["num_replicas"], _ = json.Marshal(replicas)
	}
	if cluster != "" || len(tags) > 0 {
		p := struct {
			Cluster string   `json:"cluster,omitempty"`
			Tags    []string `json:"tags,omitempty"`
		}{cluster, tags}
		cfg["placement"], _ = plainJSON(p)
	}
	doc["config"], _ = plainJSON(cfg)
	return plainJSON(doc)
}

// ConfigReplicas is the replicas backup.json's stream config names (1 when
// it names none).
func ConfigReplicas(meta []byte) (int, error) {
	var doc struct {
		Config struct {
			Replicas int `json:"num_replicas"`
		} `json:"config"`
	}
	if err := json.Unmarshal(meta, &doc); err != nil {
		return 0, fmt.Errorf("backup.json does not decode: %w", err)
	}
	return max(doc.Config.Replicas, 1), nil
}

// CapConsumerReplicas returns the snapshot read from r (stream.arc.s2) with
// every consumer whose own replicas are over max lowered to max, and every
// other byte of every entry as it was; the server refuses a consumer with
// more replicas than its stream, so a restore that lowers a stream's
// replicas lowers these too. A consumer with no replicas of its own (0)
// follows its stream and is left alone. The snapshot is decoded and encoded
// again as it streams (memory: one consumer entry and the compressor's
// blocks); a snapshot that does not decode fails the read.
func CapConsumerReplicas(r io.Reader, max int) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(capConsumers(r, pw, max)) }()
	return pr
}

func capConsumers(r io.Reader, w io.Writer, most int) error {
	in := archive.NewReader(s2.NewReader(r))
	zw := s2.NewWriter(w)
	// Reset stops the compressor's writer goroutine (and lets go of its
	// blocks) on every return; Close does on success, and a return before it
	// would leave the goroutine waiting for good, a restore that stopped
	// early or met a bad snapshot leaking it each time.
	defer zw.Reset(nil)
	out := archive.NewWriter(zw)
	buf := make([]byte, 256<<10)
	for {
		hdr, err := in.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("the snapshot does not decode: %w", err)
		}
		if strings.HasPrefix(hdr.Name, "consumers/") {
			if hdr.HeaderSize+hdr.PayloadSize > maxConsumerEntry {
				return fmt.Errorf("consumer entry %q is over %d bytes", printable(hdr.Name), maxConsumerEntry)
			}
			b, err := io.ReadAll(in)
			if err != nil {
				return fmt.Errorf("consumer entry %q: %w", printable(hdr.Name), err)
			}
			if b, err = capConsumer(b, most); err != nil {
				return fmt.Errorf("consumer entry %q: %w", printable(hdr.Name), err)
			}
			h := *hdr
			h.HeaderSize, h.PayloadSize = 0, int64(len(b))
			if err := out.WriteHeader(&h); err != nil {
				return err
			}
			if _, err := out.Write(b); err != nil {
				return err
			}
			continue
		}
		if err := out.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.CopyBuffer(writerOnly{out}, in, buf); err != nil {
			return fmt.Errorf("entry %q: %w", printable(hdr.Name), err)
		}
	}
	if err := out.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// capConsumer lowers num_replicas in a consumer entry's config to most when
// it is above it.
func capConsumer(entry []byte, most int) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(entry, &doc); err != nil {
		return nil, err
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(doc["config"], &cfg); err != nil || cfg == nil {
		return nil, errors.New("it has no config")
	}
	var n int
	if raw, ok := cfg["num_replicas"]; ok {
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, fmt.Errorf("num_replicas: %w", err)
		}
	}
	if n <= most {
		return entry, nil
	}
	cfg["num_replicas"], _ = json.Marshal(most)
	doc["config"], _ = plainJSON(cfg)
	return plainJSON(doc)
}

// plainJSON is json.Marshal without the escaping of <, > and & that only
// HTML needs, so what is not changed reads as it did.
func plainJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// writerOnly hides a writer's ReadFrom, so io.CopyBuffer uses its buffer.
type writerOnly struct{ io.Writer }
