package jsbus

import "strings"

// WithDomain makes the adapter reach JetStream in the named domain (a hub
// and leafnode topology's other JetStream): every API request goes to
// $JS.<domain>.API.… instead of $JS.API.…, as nats.go's
// jetstream.WithDomain and jsm.go's jsm.WithDomain send them. "" is the
// domain of the server the connection reached.
func WithDomain(domain string) Option { return func(o *options) { o.domain = domain } }

// validDomain reports a JetStream domain a subject token can carry.
func validDomain(d string) bool {
	return d == "" || (validName(d) && !strings.ContainsAny(d, ".*>"))
}

// api is subject, a $JS.API.… subject, in the adapter's domain.
func (a *Adapter) api(subject string) string {
	if a.cfg.domain == "" {
		return subject
	}
	if rest, ok := strings.CutPrefix(subject, "$JS.API."); ok {
		return "$JS." + a.cfg.domain + ".API." + rest
	}
	return subject
}

// Domain is the JetStream domain the adapter reaches; "" is the connected
// server's own.
func (a *Adapter) Domain() string { return a.cfg.domain }

// putSubject is where a write of key in the index is published: its
// keySubject, in a domain behind the domain's API prefix, as jetstream's
// own KV puts are.
func (a *Adapter) putSubject(key string) string {
	if a.cfg.domain != "" {
		return "$JS." + a.cfg.domain + ".API." + a.keySubject(key)
	}
	return a.keySubject(key)
}
