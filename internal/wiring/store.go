package wiring

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/filestore"
	"github.com/nats-keeper/nats-keeper/store/natsstore"
	"github.com/nats-keeper/nats-keeper/store/s3store"
)

// StoreConfig says how to reach a store that OpenStore opens.
type StoreConfig struct {
	// Conn, for a nats:// store: its credentials, context and TLS. Its URL
	// is replaced by the store URL's servers.
	Conn jsbus.ConnOptions
	// Replicas of a nats:// store's bucket when it is made; 0: 3 on a
	// cluster of 3 or more servers, else 1.
	Replicas    int
	S3Endpoint  string // of an S3-compatible store; "": AWS
	S3Region    string // "": from the AWS environment, else us-east-1
	S3PathStyle bool   // address the bucket by path rather than by host name
	Logger      *slog.Logger
}

// OpenStore opens the store that u names: "" is the directory dir
// (file://), file:///path, nats://host:port/<bucket> (a JetStream object
// store, on this bus or another, made if missing) or s3://<bucket>/<prefix>.
// A store that cannot be opened or reached fails with a sentence naming it,
// its password left out.
func OpenStore(ctx context.Context, u, dir string, c StoreConfig) (store.Store, error) {
	name := u
	if name == "" {
		name = "file://" + dir
	}
	s, err := openStore(ctx, u, dir, c)
	if err != nil {
		return nil, fmt.Errorf("the store %s could not be opened: %w", Redact(name), err)
	}
	return s, nil
}

// RemoteInFlight is the in-flight budget (jsbus.WithInFlight) InFlightFor
// gives a keeper whose store is on the network.
const RemoteInFlight = 8 << 20

// InFlightFor is the default in-flight budget of a keeper whose store is
// at u ("" is the directory): jsbus.DefaultInFlight for a directory, and
// RemoteInFlight for nats://, tls:// and s3://. With a store on the network
// the store sets a snapshot's pace, not the bus, so the chunks a larger
// window lets the server send only wait in the keeper's memory: measured
// with 512 MiB against versitygw and a second nats-server on 2 cores
// (BENCHMARKS.md), 8 MiB brought the keeper's peak RSS from 67.9 to 63.1
// MiB (s3) and from 65.9 to 60.5 MiB (nats) with no operation slower.
func InFlightFor(u string) int64 {
	scheme, _, _ := strings.Cut(u, "://")
	switch scheme {
	case "nats", "tls", "s3":
		return RemoteInFlight
	}
	return jsbus.DefaultInFlight
}

func openStore(ctx context.Context, u, dir string, c StoreConfig) (store.Store, error) {
	if u == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, err
		}
		u = "file://" + abs
	}
	scheme, _, ok := strings.Cut(u, "://")
	if !ok {
		return nil, fmt.Errorf("%q is not a URL: use file:///path, nats://host:port/bucket or s3://bucket/prefix", Redact(u))
	}
	switch scheme {
	case "file":
		p, err := url.Parse(u)
		if err != nil || p.Host != "" || p.Path == "" {
			return nil, fmt.Errorf("%q is not file:///absolute/path", Redact(u))
		}
		return filestore.Open(p.Path)
	case "nats", "tls":
		servers, bucket, err := natsstore.ParseURL(u)
		if err != nil {
			return nil, err
		}
		co := c.Conn
		co.URL = servers
		if co.Logger == nil {
			co.Logger = c.Logger
		}
		nc, err := jsbus.Connect(co)
		if err != nil {
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, err
		}
		s, err := natsstore.Open(ctx, js, bucket, natsstore.Options{Replicas: c.Replicas, Logger: c.Logger})
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &connStore{Store: s, nc: nc}, nil
	case "s3":
		bucket, prefix, err := s3store.ParseURL(u)
		if err != nil {
			return nil, err
		}
		return s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: prefix, Endpoint: c.S3Endpoint,
			Region: c.S3Region, PathStyle: c.S3PathStyle, Logger: c.Logger})
	}
	return nil, fmt.Errorf("the scheme %q is not one the keeper knows: use file:///path, nats://host:port/bucket or s3://bucket/prefix", scheme)
}

var _ store.Copier = (*connStore)(nil)

// connStore is a nats:// store with the connection it owns. It embeds the
// store's own type, not store.Store, so its optional interfaces (Copy, a
// copy that shares parts) still show.
type connStore struct {
	*natsstore.Store
	nc *nats.Conn
}

func (s *connStore) Close() error {
	err := s.Store.Close()
	s.nc.Close()
	return err
}

// Redact hides the credentials a URL may hold, for sentences: its user
// part, password and user both (a NATS token is the user). A URL with an @
// that does not parse cleanly into credentials, host and path (a password
// with an unescaped %, ?, # or /) has everything from its scheme to its
// last @ hidden. A URL without an @ holds none and is said as given, and
// so is one with no host, whose @ is in its path (file:///srv/keeper@prod).
func Redact(u string) string {
	at := strings.LastIndex(u, "@")
	if at < 0 {
		return u
	}
	scheme, rest, ok := strings.Cut(u, "://")
	ok = ok && isScheme(scheme)
	if ok && strings.HasPrefix(rest, "/") {
		return u
	}
	if p, err := url.Parse(u); err == nil && p.User != nil && !strings.Contains(p.Host+p.Path+p.RawQuery+p.Fragment+p.Opaque, "@") {
		p.User = url.User("REDACTED")
		return p.String()
	}
	start := 0
	if ok {
		start = len(scheme) + len("://")
	}
	return u[:start] + "REDACTED" + u[at:]
}

// isScheme reports whether s is a URL scheme (RFC 3986: a letter, then
// letters, digits, +, - or .). What stands before a "://" and is not one
// (":///://user:pass@host") is no scheme, and no path follows it.
func isScheme(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}
