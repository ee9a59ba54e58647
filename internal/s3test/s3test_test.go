package s3test

import "testing"

func TestStart(t *testing.T) {
	endpoint, access, secret := Start(t)
	MakeBucket(t, endpoint, access, secret, "one")
}
