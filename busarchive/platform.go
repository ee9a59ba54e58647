//go:build !unix

package busarchive

// nats-keeper runs on Linux and macOS (README, "Platforms"; other Unix
// systems build, untested): its archives and file store open every path
// with O_NOFOLLOW and openat, and its leases ask the kernel whether a
// process lives. A build for another system stops here, on this name,
// rather than on a fallback that could not work. busarchive holds it
// because every package of the keeper imports busarchive.
var _ = natsKeeperBuildsOnlyOnLinuxAndMacOS
