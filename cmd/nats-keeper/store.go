package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
	"github.com/nats-keeper/nats-keeper/store"
	"github.com/nats-keeper/nats-keeper/store/filestore"
	"github.com/nats-keeper/nats-keeper/store/natsstore"
	"github.com/nats-keeper/nats-keeper/store/s3store"
)

// storeFlags say where points and asides live, and how to reach it.
type storeFlags struct {
	Conn        connFlags // for a nats:// store: its own credentials, context and TLS
	Replicas    int       // for a nats:// store's bucket when it is made; 0: 3 on a cluster of 3 or more, else 1
	S3Endpoint  string
	S3Region    string
	S3PathStyle bool
}

func addStoreFlags(fs *pflag.FlagSet, f *storeFlags) {
	fs.StringVar(&f.Conn.Creds, "store-creds", "", "credentials file for a nats:// store")
	fs.StringVar(&f.Conn.NKey, "store-nkey", "", "NKey seed file for a nats:// store")
	fs.StringVar(&f.Conn.Context, "store-context", "", "nats CLI context to reach a nats:// store with")
	fs.StringVar(&f.Conn.TLSCert, "store-tls-cert", "", "TLS client certificate file for a nats:// store")
	fs.StringVar(&f.Conn.TLSKey, "store-tls-key", "", "TLS client key file for a nats:// store")
	fs.StringVar(&f.Conn.TLSCA, "store-tls-ca", "", "TLS certificate authority file for a nats:// store")
	fs.IntVar(&f.Replicas, "store-replicas", 0, "replicas of a nats:// store's bucket when the keeper makes it (0: 3 on a cluster of 3 or more servers, else 1)")
	fs.StringVar(&f.S3Endpoint, "s3-endpoint", "", "endpoint of an S3-compatible store for s3:// (default: AWS)")
	fs.StringVar(&f.S3Region, "s3-region", "", "region of an s3:// store (default: from the AWS environment, else us-east-1)")
	fs.BoolVar(&f.S3PathStyle, "s3-path-style", false, "address an s3:// bucket by path (endpoint/bucket) rather than by host name")
}

// openStore opens the store that u names: "" is the directory dir
// (file://), file:///path, nats://host:port/<bucket> (a JetStream object
// store, on this bus or another), or s3://<bucket>/<prefix>. A store that
// cannot be opened or reached fails with a sentence, wrapping
// keeper.ErrNoBus (exit 5).
func openStore(ctx context.Context, u, dir string, f storeFlags, log *slog.Logger) (store.Store, error) {
	fail := func(err error) (store.Store, error) {
		name := u
		if name == "" {
			name = "file://" + dir
		}
		if hasKind(err) { // such as the connection to a nats:// store's server
			return nil, fmt.Errorf("the store %s could not be opened: %w", redact(name), err)
		}
		return nil, errorf(keeper.ErrNoBus, "the store %s could not be opened: %v", redact(name), err)
	}
	if u == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return fail(err)
		}
		u = "file://" + abs
	}
	scheme, _, ok := strings.Cut(u, "://")
	if !ok {
		return fail(fmt.Errorf("%q is not a URL: use file:///path, nats://host:port/bucket or s3://bucket/prefix", redact(u)))
	}
	switch scheme {
	case "file":
		p, err := url.Parse(u)
		if err != nil || p.Host != "" || p.Path == "" {
			return fail(fmt.Errorf("%q is not file:///absolute/path", redact(u)))
		}
		s, err := filestore.Open(p.Path)
		if err != nil {
			return fail(err)
		}
		return s, nil
	case "nats", "tls":
		servers, bucket, err := natsstore.ParseURL(u)
		if err != nil {
			return fail(err)
		}
		c := f.Conn
		c.Server = servers
		nc, err := jsbus.Connect(c.options("nats-keeper store", log))
		if err != nil {
			return fail(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return fail(err)
		}
		s, err := natsstore.Open(ctx, js, bucket, natsstore.Options{Replicas: f.Replicas, Logger: log})
		if err != nil {
			nc.Close()
			return fail(err)
		}
		return &connStore{Store: s, nc: nc}, nil
	case "s3":
		bucket, prefix, err := s3store.ParseURL(u)
		if err != nil {
			return fail(err)
		}
		s, err := s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: prefix, Endpoint: f.S3Endpoint,
			Region: f.S3Region, PathStyle: f.S3PathStyle, Logger: log})
		if err != nil {
			return fail(err)
		}
		return s, nil
	}
	return fail(fmt.Errorf("the scheme %q is not one the keeper knows: use file:///path, nats://host:port/bucket or s3://bucket/prefix", scheme))
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

// redact drops a password from a URL for sentences.
func redact(u string) string {
	if p, err := url.Parse(u); err == nil && p.User != nil {
		return p.Redacted()
	}
	return u
}
