package jsbus

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/jsm.go/natscontext"
	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// ConnOptions says how to reach the bus. Explicit fields win over what the
// named nats CLI context holds.
type ConnOptions struct {
	URL     string // server URL(s), comma separated; default the context's, else nats://127.0.0.1:4222
	Creds   string // user credentials file
	NKey    string // nkey seed file
	TLSCert string // client certificate file (with TLSKey)
	TLSKey  string // client key file
	TLSCA   string // CA file to trust
	Context string // a `nats` CLI context name, read from $XDG_CONFIG_HOME/nats/context or ~/.config/nats/context
	Name    string // the connection's name; default "nats-keeper"

	ReconnectWait time.Duration // between reconnect attempts; default 2s
	Logger        *slog.Logger  // connection events; default slog.Default()
}

// Connect connects to the bus and reconnects forever after it is lost, so a
// keeper goes on serving after a server restart. A missing or unreadable file
// or context is an error wrapping keeper.ErrBadRequest; a bus that cannot be
// reached, one wrapping keeper.ErrNoBus.
func Connect(o ConnOptions) (*nats.Conn, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	server := o.URL
	var opts []nats.Option
	if o.Context != "" {
		copts, url, err := contextOptions(o.Context)
		if err != nil {
			return nil, fmt.Errorf("jsbus: nats context %q cannot be used: %w, so no connection was made", o.Context, err)
		}
		opts = append(opts, copts...)
		if server == "" {
			server = url
		}
	}
	if server == "" {
		server = nats.DefaultURL
	}
	if err := checkConnFiles(o); err != nil {
		return nil, err
	}
	auth, err := authOptions(o)
	if err != nil {
		return nil, err
	}
	opts = append(opts, auth...)
	opts = append(opts, reconnectOptions(o, log)...)
	nc, err := nats.Connect(server, opts...)
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) || errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("jsbus: no server answered at %s: %w: %w", redact(server), keeper.ErrNoBus, err)
		}
		return nil, fmt.Errorf("jsbus: connect to %s failed: %w: %w", redact(server), keeper.ErrNoBus, err)
	}
	return nc, nil
}

// checkConnFiles refuses, before anything is dialled, a credentials, nkey
// or TLS file that is not a regular file, and a TLS certificate without
// its key or a key without its certificate.
func checkConnFiles(o ConnOptions) error {
	for _, f := range []struct{ what, path string }{
		{"credentials", o.Creds}, {"nkey seed", o.NKey}, {"TLS certificate", o.TLSCert}, {"TLS key", o.TLSKey}, {"TLS CA", o.TLSCA},
	} {
		if f.path == "" {
			continue
		}
		fi, err := os.Stat(f.path)
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("jsbus: the %s file %q is not a readable file, so no connection was made: %w", f.what, f.path, keeper.ErrBadRequest)
		}
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return fmt.Errorf("jsbus: a TLS certificate needs its key and a key its certificate, so no connection was made: %w", keeper.ErrBadRequest)
	}
	return nil
}

// authOptions are the options of o's credentials, nkey seed and TLS files,
// in that order; an nkey seed that cannot be read is an error.
func authOptions(o ConnOptions) ([]nats.Option, error) {
	var opts []nats.Option
	if o.Creds != "" {
		opts = append(opts, nats.UserCredentials(o.Creds))
	}
	if o.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(o.NKey)
		if err != nil {
			return nil, fmt.Errorf("jsbus: read nkey seed %q, so no connection was made: %w: %w", o.NKey, keeper.ErrBadRequest, err)
		}
		opts = append(opts, opt)
	}
	if o.TLSCert != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	return opts, nil
}

// reconnectOptions name the connection, make it reconnect forever, o's
// ReconnectWait apart (2s by default), and log its events to log.
func reconnectOptions(o ConnOptions, log *slog.Logger) []nats.Option {
	name := o.Name
	if name == "" {
		name = "nats-keeper"
	}
	wait := o.ReconnectWait
	if wait <= 0 {
		wait = 2 * time.Second
	}
	return []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		nats.ReconnectJitter(wait/4, wait/2),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if nc.IsClosed() {
				return // closed on purpose: no reconnect follows
			}
			log.Warn("disconnected from the bus; reconnecting", "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to the bus", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerVersion())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("connection to the bus closed", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("bus connection error", "subject", subj, "err", err)
		}),
	}
}

// redact hides passwords and tokens in server URLs for messages.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			parts[i] = "(an unparsable URL)"
			continue
		}
		if u.User != nil {
			u.User = url.User("redacted")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// ContextDomain is the JetStream domain a `nats` CLI context names ("" for
// none), for the commands that reach JetStream in it (WithDomain).
func ContextDomain(name string) (string, error) {
	if _, _, err := contextOptions(name); err != nil {
		return "", fmt.Errorf("jsbus: nats context %q cannot be used: %w", name, err)
	}
	c, err := natscontext.New(name, true)
	if err != nil {
		return "", fmt.Errorf("jsbus: nats context %q cannot be used: %w: %w", name, keeper.ErrBadRequest, err)
	}
	return c.JSDomain(), nil
}

// contextOptions loads a `nats` CLI context through jsm.go's natscontext,
// refusing a context file that is a symlink and settings the keeper cannot
// honour (a JetStream API prefix; a domain is read by ContextDomain).
func contextOptions(name string) ([]nats.Option, string, error) {
	path, err := natscontext.ContextPath(name)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", keeper.ErrBadRequest, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, "", fmt.Errorf("%w: no context file %s (%v)", keeper.ErrBadRequest, path, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%w: %s is not a regular file (a symlink is never followed)", keeper.ErrBadRequest, path)
	}
	c, err := natscontext.New(name, true)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", keeper.ErrBadRequest, err)
	}
	if c.JSAPIPrefix() != "" {
		return nil, "", fmt.Errorf("%w: it names a JetStream API prefix, which the keeper does not support (a JetStream domain it does: give the context a domain, or --js-domain)", keeper.ErrBadRequest)
	}
	opts, err := c.NATSOptions()
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", keeper.ErrBadRequest, err)
	}
	return opts, c.ServerURL(), nil
}
