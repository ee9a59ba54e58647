package main

// The zone database is linked in, so a policy's --time-zone reads the same
// on a host or in an image without /usr/share/zoneinfo.
import _ "time/tzdata"
