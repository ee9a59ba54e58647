package jsbus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// maxContextSize bounds a nats context file.
const maxContextSize = 1 << 20

// natsContext is the part of a `nats` CLI context file (the JSON that
// `nats context save` writes) that the keeper can use.
type natsContext struct {
	URL         string   `json:"url"`
	User        string   `json:"user"`
	Password    string   `json:"password"`
	Token       string   `json:"token"`
	Creds       string   `json:"creds"`
	NKey        string   `json:"nkey"`
	Cert        string   `json:"cert"`
	Key         string   `json:"key"`
	CA          string   `json:"ca"`
	InboxPrefix string   `json:"inbox_prefix"`
	TLSFirst    bool     `json:"tls_first"`
	UserJWT     string   `json:"user_jwt"`
	UserSeed    string   `json:"user_seed"`
	Unsupported []string `json:"-"`
}

// unsupportedContextFields are settings this keeper cannot honour; a context
// that sets one is refused rather than used half.
var unsupportedContextFields = []string{
	"nsc", "socks_proxy", "jetstream_domain", "jetstream_api_prefix", "jetstream_event_prefix",
	"windows_cert_store", "windows_cert_match_by", "windows_cert_match",
}

// parseContext decodes a context file's JSON.
func parseContext(data []byte) (*natsContext, error) {
	if len(data) > maxContextSize {
		return nil, fmt.Errorf("it is over %d bytes", maxContextSize)
	}
	var c natsContext
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("it is not a JSON object: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("it is not a JSON object: %w", err)
	}
	for _, f := range unsupportedContextFields {
		if v, ok := raw[f]; ok && string(v) != `""` && string(v) != "null" && string(v) != "[]" {
			c.Unsupported = append(c.Unsupported, f)
		}
	}
	for _, ref := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		p, err := contextPath(*ref)
		if err != nil {
			return nil, err
		}
		*ref = p
	}
	for _, lit := range []string{c.Password, c.Token, c.UserJWT, c.UserSeed} {
		if s := resolverScheme(lit); s != "" {
			c.Unsupported = append(c.Unsupported, "a secret read through "+s+":")
		}
	}
	return &c, nil
}

// resolverScheme is the scheme of a secret that the nats CLI would read
// through one of its resolvers (which this keeper does not run), or "".
func resolverScheme(lit string) string {
	scheme, _, ok := strings.Cut(lit, ":")
	if !ok {
		return ""
	}
	switch strings.ToLower(scheme) {
	case "data", "env", "file", "nsc", "op":
		return scheme
	}
	return ""
}

// contextPath turns a context's file reference into a path: file:// is
// stripped, $VAR and a leading ~ are expanded; other schemes are refused.
func contextPath(ref string) (string, error) {
	if ref == "" {
		return "", nil
	}
	if rest, ok := strings.CutPrefix(ref, "file://"); ok {
		ref = rest
	} else if i := strings.Index(ref, "://"); i > 0 {
		return "", fmt.Errorf("it refers to %q through %s://, which this keeper cannot read", ref, ref[:i])
	}
	ref = os.ExpandEnv(ref)
	if rest, ok := strings.CutPrefix(ref, "~"); ok && (rest == "" || strings.HasPrefix(rest, "/")) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("it refers to %q and the home directory is unknown: %w", ref, err)
		}
		ref = home + rest
	}
	return ref, nil
}

// contextDir is where the nats CLI keeps contexts.
func contextDir() (string, error) {
	if x := os.Getenv("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "nats", "context"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, ".config", "nats", "context"), nil
}

// loadContext reads the named context, refusing names that are not plain,
// symlinks, and oversized files.
func loadContext(name string) (*natsContext, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("jsbus: %q is not a nats context name: %w", name, keeper.ErrBadRequest)
	}
	dir, err := contextDir()
	if err != nil {
		return nil, fmt.Errorf("jsbus: find the nats context directory: %w: %w", keeper.ErrBadRequest, err)
	}
	path := filepath.Join(dir, name+".json")
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("jsbus: there is no nats context %q (looked for %s): %w", name, path, keeper.ErrBadRequest)
	}
	if err != nil {
		return nil, fmt.Errorf("jsbus: read nats context %q: %w: %w", name, keeper.ErrBadRequest, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("jsbus: nats context %s is not a regular file (symlinks are not followed): %w", path, keeper.ErrBadRequest)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("jsbus: read nats context %q: %w: %w", name, keeper.ErrBadRequest, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxContextSize+1))
	if err != nil {
		return nil, fmt.Errorf("jsbus: read nats context %q: %w: %w", name, keeper.ErrBadRequest, err)
	}
	c, err := parseContext(data)
	if err != nil {
		return nil, fmt.Errorf("jsbus: nats context %s cannot be used, because %w: %w", path, err, keeper.ErrBadRequest)
	}
	if len(c.Unsupported) > 0 {
		return nil, fmt.Errorf("jsbus: nats context %s sets %s, which this keeper does not support, so it was not used: %w",
			path, strings.Join(c.Unsupported, ", "), keeper.ErrBadRequest)
	}
	return c, nil
}

// options turns the context into connection options (the URL is separate).
func (c *natsContext) options() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case c.User != "":
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	case c.Creds != "":
		opts = append(opts, nats.UserCredentials(c.Creds))
	case c.NKey != "":
		opt, err := nats.NkeyOptionFromSeed(c.NKey)
		if err != nil {
			return nil, fmt.Errorf("read the context's nkey seed %s: %w", c.NKey, err)
		}
		opts = append(opts, opt)
	case c.UserJWT != "" && c.UserSeed != "":
		opts = append(opts, nats.UserJWTAndSeed(c.UserJWT, c.UserSeed))
	case c.UserJWT != "":
		return nil, errors.New("the context has a user JWT without its seed")
	}
	if c.Token != "" {
		opts = append(opts, nats.Token(c.Token))
	}
	if c.Cert != "" && c.Key != "" {
		opts = append(opts, nats.ClientCert(c.Cert, c.Key))
	}
	if c.CA != "" {
		opts = append(opts, nats.RootCAs(c.CA))
	}
	if c.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(c.InboxPrefix))
	}
	if c.TLSFirst {
		opts = append(opts, nats.TLSHandshakeFirst())
	}
	return opts, nil
}
