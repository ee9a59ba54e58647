package s3store

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/nats-keeper/nats-keeper/store"
)

// ParseURL splits s3://<bucket>/<prefix> into the bucket and the key prefix
// ("" when the URL names the bucket alone). Anything else is refused with a
// sentence saying why.
func ParseURL(u string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(u, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3://<bucket>/<prefix> URL: it does not begin with s3://", u)
	}
	if strings.ContainsAny(rest, "?#") {
		return "", "", fmt.Errorf("%q is not an s3://<bucket>/<prefix> URL: it holds a query or fragment (give the endpoint and region apart)", u)
	}
	bucket, prefix, _ = strings.Cut(rest, "/")
	if err := CheckBucket(bucket); err != nil {
		return "", "", fmt.Errorf("%q is not a usable s3:// URL: %w", u, err)
	}
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix != "" {
		if err := store.CheckKey(prefix); err != nil {
			return "", "", fmt.Errorf("%q is not a usable s3:// URL: its prefix is %w", u, err)
		}
	}
	return bucket, prefix, nil
}

// CheckBucket refuses a name that S3's rules for general purpose buckets
// refuse: 3 to 63 characters of lower-case letters, digits, dots and hyphens,
// beginning and ending with a letter or digit, no two adjacent dots, not an
// IP address, and none of the reserved prefixes and suffixes.
func CheckBucket(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("the bucket name %q %s, which S3 refuses", name, why)
	}
	if len(name) < 3 || len(name) > 63 {
		return bad(fmt.Sprintf("is %d characters, not 3 to 63", len(name)))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			return bad("holds a character other than a lower-case letter, digit, dot or hyphen")
		}
	}
	if alnum := func(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }; !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return bad("does not begin and end with a letter or digit")
	}
	if strings.Contains(name, "..") {
		return bad("has two adjacent dots")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return bad("is an IP address")
	}
	for _, p := range []string{"xn--", "sthree-", "amzn-s3-demo-"} {
		if strings.HasPrefix(name, p) {
			return bad("begins with the reserved " + p)
		}
	}
	for _, sfx := range []string{"-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3"} {
		if strings.HasSuffix(name, sfx) {
			return bad("ends with the reserved " + sfx)
		}
	}
	return nil
}
