package keeper

// domainOf is a Bus that reaches JetStream in a named domain (jsbus's
// Adapter with WithDomain).
type domainOf interface{ Domain() string }

// busDomain says which JetStream domain "on the bus" means, for a sentence
// that found no kept data: a kept data in another domain (a leafnode's) is
// only seen by a keeper of that domain.
func (k *Keeper) busDomain() string {
	if d, ok := k.bus.(domainOf); ok && d.Domain() != "" {
		return " in JetStream domain " + d.Domain()
	}
	return " in the connected server's JetStream domain (kept data in another domain, such as a leafnode's, needs a keeper started with --js-domain)"
}
