// Package controlplane runs a real Kubernetes control plane with the real Flux controllers on one machine, with
// no container engine: kube-apiserver and etcd (controller-runtime's envtest), kube-controller-manager's garbage
// collector and namespace controller, and Flux's source-controller, kustomize-controller and helm-controller as
// processes. It installs the operator's RBAC from config/ and hands out a kubeconfig of the operator's
// ServiceAccount, so that fluxdeployer runs with exactly the rights an installation grants it.
//
// The envtest-based tests (internal/testenv), the end-to-end tests (e2e/) and `make demo` (hack/demo) share it.
package controlplane
