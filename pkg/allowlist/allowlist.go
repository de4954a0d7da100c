// Package allowlist holds the registry hosts a platform lets the operator, and Flux on its behalf, reach
// (--allowed-registries): one list, matched the same way wherever a host is checked, so that no reader of a tenant's
// input (a vector's reference, an artifact's access, a registry's redirect) allows what another refuses.
package allowlist

import (
	"slices"
	"strings"
)

// Hosts are host[:port] entries. An entry allows exactly the host and port it names (an entry without a port
// allows a host named without one): ports of one host may be different services. Hosts compare
// case-insensitively, as DNS names do. Empty allows every host: no list was given.
type Hosts []string

// Allows reports whether host (host[:port], as a reference or a URL names it) is allowed.
func (h Hosts) Allows(host string) bool {
	return len(h) == 0 || slices.ContainsFunc(h, func(entry string) bool { return strings.EqualFold(entry, host) })
}
