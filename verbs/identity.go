package verbs

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-keeper/nats-keeper/kept"
)

// RequestInfoHeader is the header nats-server sets on a request that
// crossed accounts through a service import (server.ClientInfoHdr): the
// requester's ClientInfo as JSON, overwriting any such header the client
// sent. With the import's share: true it holds the user, the connection's
// name and host; without, only the account. A request that did not cross
// accounts keeps whatever header its sender wrote.
const RequestInfoHeader = "Nats-Request-Info"

// userInfoSubject is the server's "who am I" service, imported into every
// account when the server has a system account.
const userInfoSubject = "$SYS.REQ.USER.INFO"

// userInfoWait bounds how long Serve waits for the server to say who the
// keeper's connection is.
const userInfoWait = 2 * time.Second

// maxIdentityField bounds each field of an identity taken from a header.
const maxIdentityField = 256

// requestInfo is the part of nats-server's ClientInfo (server/events.go)
// the keeper records.
type requestInfo struct {
	Account string `json:"acc"`
	User    string `json:"user"`
	Name    string `json:"name"`
	Host    string `json:"host"`
	Server  string `json:"server"`
	Cluster string `json:"cluster"`
}

// ParseRequestInfo reads a Nats-Request-Info header into the identity the
// bus gives, for a keeper whose own account is own. It returns nil and why
// when the header cannot be believed: it is not valid, names no account,
// or names the keeper's own account, which no service import sets (an
// import always comes from another account), so a client of the keeper's
// account wrote it. Each field is cut to 256 bytes.
func ParseRequestInfo(header, own string) (*kept.BusIdentity, string) {
	var ci requestInfo
	if err := json.Unmarshal([]byte(header), &ci); err != nil {
		return nil, fmt.Sprintf("a %s header that is not valid JSON (%v)", RequestInfoHeader, err)
	}
	if ci.Account == "" {
		return nil, fmt.Sprintf("a %s header that names no account", RequestInfoHeader)
	}
	if own != "" && cut(ci.Account) == cut(own) {
		return nil, fmt.Sprintf("a %s header naming the keeper's own account %s, which no service import sets", RequestInfoHeader, cut(own))
	}
	return &kept.BusIdentity{Source: kept.IdentityRequestInfo, Account: cut(ci.Account), User: cut(ci.User), Name: cut(ci.Name),
		Host: cut(ci.Host), Server: cut(ci.Server), Cluster: cut(ci.Cluster)}, ""
}

// cut bounds one field and makes it valid UTF-8.
func cut(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxIdentityField {
		return s
	}
	n := maxIdentityField
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// identityOf is who asked m, as the bus says it: its Nats-Request-Info
// header when the server set one, else the keeper's own connection.
func (s *Service) identityOf(m *nats.Msg) *kept.BusIdentity {
	own := s.own
	if h := m.Header.Get(RequestInfoHeader); h != "" {
		id, ignored := ParseRequestInfo(h, own.Account)
		if id != nil {
			return id
		}
		own.Ignored = ignored
	}
	return &own
}

// ownIdentity is the keeper's own connection as the server says it (its
// user and account, from $SYS.REQ.USER.INFO), with its name. It is asked
// once, at Serve: the server the keeper is connected to may change, the
// user and account do not.
// When the server does not answer in userInfoWait (no system account, or
// the keeper may not ask), the user is the one the connection was given,
// and the account is left unknown.
func ownIdentity(nc *nats.Conn) kept.BusIdentity {
	id := kept.BusIdentity{Source: kept.IdentityKeeper, User: nc.Opts.User, Name: nc.Opts.Name}
	msg, err := nc.Request(userInfoSubject, nil, userInfoWait)
	if err != nil {
		return id
	}
	var resp struct {
		Data *struct {
			User    string `json:"user"`
			Account string `json:"account"`
		} `json:"data"`
	}
	if json.Unmarshal(msg.Data, &resp) == nil && resp.Data != nil {
		id.User, id.Account = cut(resp.Data.User), cut(resp.Data.Account)
	}
	return id
}
