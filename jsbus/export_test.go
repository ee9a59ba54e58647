package jsbus

// WithTimeout is withTimeout, for the package's external tests: they
// shorten the wait for a server that does not answer.
var WithTimeout = withTimeout
