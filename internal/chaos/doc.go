// Package chaos holds BenchmarkChaosAtScale (`make chaos`): fluxdeployer, run as a process under its
// ServiceAccount, converges a landscape of VectorDeployments once undisturbed and once while it is killed with
// SIGKILL every few seconds, the API server restarts and the OCI registry is unavailable for 30 seconds; both
// end states must be the same. Then two replicas measure leader-election failover. The phases (undisturbed,
// chaos, same-state, failover) run as subtests of TestChaosAtScale with FLUXDEPLOYER_CHAOS=1, and in that order
// in BenchmarkChaosAtScale, which reports the figures. It runs for minutes: `go test ./...` compiles it and
// `make test` does not run it.
package chaos
