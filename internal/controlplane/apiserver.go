package controlplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	helmv2 "github.com/fluxcd/helm-controller/api/v2"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// APIServer is a running kube-apiserver and etcd with the project's CRDs, and an admin client for them.
type APIServer struct {
	Config *rest.Config
	Client client.Client
	Scheme *kruntime.Scheme
	// Kubeconfig authenticates a member of system:masters, for the programs run as processes (Flux's controllers,
	// kube-controller-manager). fluxdeployer itself gets ServiceAccountKubeconfig instead.
	Kubeconfig []byte
	env        *envtest.Environment
	// certDir holds kube-apiserver's serving certificates and service-account keys. It is ours, not envtest's,
	// so that Restart keeps them: a new CA or signing key would invalidate every client's kubeconfig and token.
	certDir string
	audit   *AuditLog // nil unless started by StartAuditedAPIServer
}

// FluxCRDDirs are the Flux CRDs the Flux deployer writes and reads (HelmRepository, HelmChart, OCIRepository,
// HelmRelease, Kustomization) and the rest of source-controller's, which it refuses to start without.
func FluxCRDDirs() []string {
	root := RepoRoot()
	return []string{
		filepath.Join(root, "internal", "fluxdeployer", "testdata", "crds"),
		filepath.Join(root, "e2e", "testdata", "crds"),
	}
}

// StartAPIServer starts kube-apiserver and etcd from assetsDir with the project's CRDs and any extra CRD
// directories installed. The API server authorizes with RBAC and runs the OwnerReferencesPermissionEnforcement
// admission plugin, as production clusters do, so that an owner reference with blockOwnerDeletion needs update
// rights on the owner's finalizers.
func StartAPIServer(assetsDir string, extraCRDDirs ...string) (*APIServer, error) {
	return startAPIServer(assetsDir, "", extraCRDDirs)
}

// StartAuditedAPIServer is StartAPIServer with an audit log of every request user makes (a user name such as
// system:serviceaccount:<namespace>:<name>).
func StartAuditedAPIServer(assetsDir, user string, extraCRDDirs ...string) (*APIServer, *AuditLog, error) {
	s, err := startAPIServer(assetsDir, user, extraCRDDirs)
	if err != nil {
		return nil, nil, err
	}
	return s, s.audit, nil
}

func startAPIServer(assetsDir, auditUser string, extraCRDDirs []string) (_ *APIServer, err error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory: assetsDir,
		CRDDirectoryPaths:     append([]string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, extraCRDDirs...),
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
		// kube-apiserver's graceful shutdown waits for the requests in flight, each bounded by its
		// --request-timeout (1m): envtest's 20 s gave up on the restart of BenchmarkChaosAtScale, and
		// killed the server 20 s after it had stopped listening and logged nothing more.
		ControlPlaneStopTimeout: 70 * time.Second,
	}
	te.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
	certDir, err := os.MkdirTemp("", "kube-apiserver-")
	if err != nil {
		return nil, err
	}
	te.ControlPlane.GetAPIServer().CertDir = certDir
	var audit *AuditLog
	if auditUser != "" {
		var flags map[string]string
		if audit, flags, err = auditFlags(certDir, auditUser); err != nil {
			return nil, errors.Join(err, os.RemoveAll(certDir))
		}
		for name, value := range flags {
			te.ControlPlane.GetAPIServer().Configure().Set(name, value)
		}
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(certDir))
	}
	defer func() {
		if err != nil {
			_ = te.Stop()
			_ = os.RemoveAll(certDir)
		}
	}()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	admin, err := te.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	return &APIServer{Config: cfg, Client: c, Scheme: scheme, Kubeconfig: kubeconfig, env: te, certDir: certDir, audit: audit}, nil
}

// Connect uses an existing cluster through a kubeconfig instead of starting one; Stop leaves it running.
func Connect(kubeconfigPath string) (*APIServer, error) {
	kubeconfig, err := os.ReadFile(kubeconfigPath)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &APIServer{Config: cfg, Client: c, Scheme: scheme, Kubeconfig: kubeconfig}, nil
}

// Stop stops kube-apiserver and etcd, if they were started here.
func (s *APIServer) Stop() error {
	if s.env == nil {
		return nil
	}
	return errors.Join(s.env.Stop(), os.RemoveAll(s.certDir))
}

// Restart stops kube-apiserver and starts it again on the same port, certificates and etcd, as a control-plane
// upgrade or crash would: clients see their connections and watches drop, and the same credentials work after.
func (s *APIServer) Restart() error {
	if s.env == nil {
		return errors.New("restarting an API server that was not started here")
	}
	api := s.env.ControlPlane.GetAPIServer()
	if err := api.Stop(); err != nil {
		return fmt.Errorf("stopping kube-apiserver: %w", err)
	}
	if err := api.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	return nil
}

// NewScheme knows Kubernetes' kinds, CRDs, the project's kinds and the Flux kinds it writes.
func NewScheme() (*kruntime.Scheme, error) {
	scheme := kruntime.NewScheme()
	for _, add := range []func(*kruntime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, konfidencev1.AddToScheme,
		sourcev1.AddToScheme, helmv2.AddToScheme, kustomizev1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return scheme, nil
}

// WriteKubeconfig writes a kubeconfig into dir and returns its path.
func WriteKubeconfig(dir, name string, kubeconfig []byte) (string, error) {
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, kubeconfig, 0o600)
}
