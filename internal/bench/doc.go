// Package bench measures the operator at scale on a real kube-apiserver with the in-process OCI registry:
// convergence against the API server's own floor, writes and events per artifact, steady state, memory and large
// vectors. Its benchmarks are in test files (run them with the Makefile's bench-* targets); docs/performance.md
// records what they measured and how to read their output.
package bench
