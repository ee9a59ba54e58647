package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-keeper/nats-keeper/kept"
)

// maxSizeFlag bounds a size given on the command line: more than a
// keeper's store could hold is a typing slip.
const maxSizeFlag = 1 << 50 // 1 PiB

// sizeUnits are the units a size flag takes, in bytes: binary multiples,
// as HumanBytes writes them.
var sizeUnits = []struct {
	name  string
	bytes int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// sizeFlag is a flag of bytes, given as a whole number with an optional
// unit: 0, 4096, 512KiB, 64MiB, 2GiB.
type sizeFlag int64

func (s *sizeFlag) String() string { return formatSize(int64(*s)) }
func (s *sizeFlag) Type() string   { return "size" }

func (s *sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s = sizeFlag(n)
	return nil
}

// parseSize reads a size: a whole number of bytes, or of one of
// sizeUnits, at most maxSizeFlag bytes.
func parseSize(v string) (int64, error) {
	num, mult := v, int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(v, u.name); ok {
			num, mult = n, u.bytes
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 63)
	if err != nil || num == "" || num[0] == '+' {
		return 0, fmt.Errorf("%.40q is not a size: a whole number with a unit of B, KiB, MiB, GiB or TiB, such as 64MiB (no unit: bytes)", v)
	}
	if n > maxSizeFlag/uint64(mult) {
		return 0, fmt.Errorf("%.40q is over %s", v, kept.HumanBytes(maxSizeFlag))
	}
	return int64(n) * mult, nil
}

// formatSize writes n in the largest unit that divides it, so that
// parseSize reads it back.
func formatSize(n int64) string {
	for _, u := range sizeUnits {
		if n != 0 && n%u.bytes == 0 && u.bytes > 1 {
			return strconv.FormatInt(n/u.bytes, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}
