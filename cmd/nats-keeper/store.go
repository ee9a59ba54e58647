package main

import (
	"context"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/store"
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
	fs.IntVar(&f.Replicas, "store-replicas", 0, "replicas of a nats:// store's bucket, made or raised at start (0: 3 on a cluster of 3 or more servers, else 1)")
	fs.StringVar(&f.S3Endpoint, "s3-endpoint", "", "endpoint of an S3-compatible store for s3:// (default: AWS)")
	fs.StringVar(&f.S3Region, "s3-region", "", "region of an s3:// store (default: from the AWS environment, else us-east-1)")
	fs.BoolVar(&f.S3PathStyle, "s3-path-style", false, "address an s3:// bucket by path (endpoint/bucket) rather than by host name")
}

// openStore opens the store that u names, as wiring.OpenStore does: "" is
// the directory dir (file://), file:///path, nats://host:port/<bucket> or
// s3://<bucket>/<prefix>. A failure that names no kind of its own wraps
// kept.ErrNoBus (exit 5).
func openStore(ctx context.Context, u, dir string, f storeFlags, log *slog.Logger) (store.Store, error) {
	st, err := wiring.OpenStore(ctx, u, dir, wiring.StoreConfig{Conn: f.Conn.options("nats-keeper store", log),
		Replicas: f.Replicas, S3Endpoint: f.S3Endpoint, S3Region: f.S3Region, S3PathStyle: f.S3PathStyle, Logger: log})
	if err != nil && kept.KindOf(err) == nil { // a kind of its own: such as the connection to a nats:// store's server
		return nil, kept.Errorf(kept.ErrNoBus, "%w", err)
	}
	return st, err
}
