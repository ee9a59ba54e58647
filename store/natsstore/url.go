package natsstore

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseURL splits a store URL, nats://host:port/<bucket> (or tls://, and
// several hosts separated by commas), into the servers to connect to, as
// nats.Connect takes them, and the bucket. Credentials do not belong in the
// URL (they are given with --store-creds or a context), nor do queries.
func ParseURL(u string) (servers, bucket string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("the store URL %.200q %s; write nats://host:port/<bucket> (or tls://, hosts separated by commas)", u, why)
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || (scheme != "nats" && scheme != "tls") {
		return bad("does not begin with nats:// or tls://")
	}
	if strings.ContainsAny(rest, "@?#") {
		return bad("holds credentials, a query or a fragment; give credentials with --store-creds or --store-context")
	}
	hosts, bucket, ok := strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return bad("names no bucket")
	}
	if !validBucket.MatchString(bucket) {
		return bad("names a bucket that is not 1 to 251 letters, digits, - or _")
	}
	var list []string
	for _, h := range strings.Split(hosts, ",") {
		host, port := h, ""
		if strings.Contains(h, ":") {
			if host, port, err = net.SplitHostPort(h); err != nil {
				return bad(fmt.Sprintf("has a host %q that is not host:port", h))
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return bad(fmt.Sprintf("has a host %q whose port is not 1 to 65535", h))
			}
		}
		if host == "" || strings.ContainsAny(host, " /\\") {
			return bad(fmt.Sprintf("has an empty or malformed host %q", h))
		}
		list = append(list, scheme+"://"+h)
	}
	return strings.Join(list, ","), bucket, nil
}
