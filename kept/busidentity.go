package kept

import (
	"fmt"
	"strings"
)

// Where a BusIdentity comes from.
const (
	// IdentityRequestInfo: the Nats-Request-Info header the server set on
	// a request that crossed accounts through a service import (with
	// share: true, the user, name and host too; without, the account).
	IdentityRequestInfo = "request-info"
	// IdentityKeeper: the bus gave no identity (the request came from
	// the keeper's own account), so this is the keeper's own connection's
	// user and account, which is what the bus vouches for.
	IdentityKeeper = "keeper-connection"
)

// BusIdentity is who asked as the bus says it, unlike Request.Caller,
// which is what the request claims. Acts record it as bus-identity beside
// caller (see Act).
type BusIdentity struct {
	Source  string `json:"source"`            // IdentityRequestInfo or IdentityKeeper
	Account string `json:"account,omitempty"` // the account the request came from (the keeper's own for IdentityKeeper)
	User    string `json:"user,omitempty"`    // the user it authenticated as: a name, or an NKey's public key
	Name    string `json:"name,omitempty"`    // the client connection's name, as the client gave it
	Host    string `json:"host,omitempty"`    // the client's address, as the server saw it
	Server  string `json:"server,omitempty"`  // the server the client is connected to
	Cluster string `json:"cluster,omitempty"` // that server's cluster
	// Ignored, when set, says what header the keeper did not believe, and
	// why (a Nats-Request-Info naming the keeper's own account, which no
	// service import sets, or one that is not valid).
	Ignored string `json:"ignored,omitempty"`
}

// String is the identity as acts and logs say it: "appA in account APP"
// (request-info), "keeper in account KEEPER (the bus gave no identity; the
// keeper's own connection)".
func (b *BusIdentity) String() string {
	if b == nil {
		return ""
	}
	who := b.User
	switch {
	case who != "":
	case b.Source == IdentityRequestInfo:
		who = "a user the import does not share"
	default:
		who = "a user without a name"
	}
	if b.Name != "" {
		who += fmt.Sprintf(" (connection %q)", b.Name)
	}
	if b.Account != "" {
		who += " in account " + b.Account
	}
	if b.Source == IdentityKeeper {
		who += " (the bus gave no identity; the keeper's own connection)"
	}
	return strings.TrimSpace(who)
}
