package fluxdeployer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	fluxclient "github.com/fluxcd/pkg/runtime/client"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/outcome"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

// Defaults of the flags that bound remote calls and reconciles.
const (
	// DefaultRemoteRequestTimeout is Flux's timeout of a request to a remote cluster (KubeConfigOptions).
	DefaultRemoteRequestTimeout = 30 * time.Second
	// DefaultReconcileTimeout leaves room for the two requests to a remote target (Flux's priority-and-fairness
	// ping and the Service list) and the applies to the local API server.
	DefaultReconcileTimeout = 2 * time.Minute
)

// RemoteOptions bound what the deployer does with a remote target's kubeconfig, which a tenant writes, and how
// long one reconcile may take, so that a target that never answers holds a worker for a bounded time only.
type RemoteOptions struct {
	// KubeConfig is Flux's: --insecure-kubeconfig-exec, --insecure-kubeconfig-tls, and the timeout of each
	// request (--remote-request-timeout).
	KubeConfig fluxclient.KubeConfigOptions
	// ReconcileTimeout bounds the steps of one reconcile of an ArtifactDeployment (--reconcile-timeout).
	ReconcileTimeout time.Duration
	// AllowedTargetHosts are the API servers, host or host:port, that remote targets may name
	// (--allowed-target-hosts). Empty: remote targets are off.
	AllowedTargetHosts []string
}

// BindFlags registers the flags, with Flux's names where Flux has them.
func (o *RemoteOptions) BindFlags(fs *pflag.FlagSet) {
	o.KubeConfig.BindFlags(fs)
	o.KubeConfig.Timeout = new(time.Duration)
	fs.DurationVar(o.KubeConfig.Timeout, "remote-request-timeout", DefaultRemoteRequestTimeout,
		"timeout of each request the Flux deployer sends to a remote target's API server (0: none; --reconcile-timeout still applies)")
	fs.DurationVar(&o.ReconcileTimeout, "reconcile-timeout", DefaultReconcileTimeout,
		"deadline of one ArtifactDeployment reconcile; the status is written after it")
	fs.StringSliceVar(&o.AllowedTargetHosts, "allowed-target-hosts", nil,
		"API server hosts (host[:port]) of the remote clusters ArtifactDeployments may deploy to through a kubeconfig; "+
			"a kubeconfig naming another is refused (RemoteTargetNotAllowed). Empty: remote targets are off")
}

func (o RemoteOptions) reconcileTimeout() time.Duration {
	if o.ReconcileTimeout <= 0 {
		return DefaultReconcileTimeout
	}
	return o.ReconcileTimeout
}

func (o RemoteOptions) requestTimeout() time.Duration {
	if o.KubeConfig.Timeout == nil {
		return DefaultRemoteRequestTimeout
	}
	return *o.KubeConfig.Timeout
}

// remoteReader is a client of the remote target a kubeconfig names; source names the Secret and key for messages.
// It knows only Services, the one kind it reads, so it asks the target no discovery.
func (o RemoteOptions) remoteReader(ctx context.Context, kubeconfig []byte, source string, scheme *runtime.Scheme) (client.Reader, error) {
	cfg, err := o.restConfig(ctx, kubeconfig, source)
	if err != nil {
		return nil, err
	}
	mapper := apimeta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Service"), apimeta.RESTScopeNamespace)
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, outcome.Retrying(konfidencev1.DeploymentResultFailedReason, fmt.Errorf("client for %s: %w", source, err))
	}
	httpClient.CheckRedirect = refuseRedirect
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: httpClient})
	if err != nil {
		return nil, outcome.Retrying(konfidencev1.DeploymentResultFailedReason, fmt.Errorf("client for %s: %w", source, err))
	}
	return c, nil
}

// refuseRedirect stops every redirect of a remote target. client-go adds the tenant's credentials to each request
// it sends, a redirect's too, so following one would hand the target's token to whatever host the answer names,
// none of which the operator allowed; an API server has no reason to redirect the requests the deployer sends.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return &redirectRefused{host: req.URL.Host}
}

// redirectRefused is a remote target's redirect, not followed.
type redirectRefused struct{ host string }

func (e *redirectRefused) Error() string {
	return fmt.Sprintf("the remote target redirected to %s; redirects of remote targets are not followed", remoteText(e.host))
}

// restConfig reads a kubeconfig as Flux's fluxcd/pkg/runtime/client does: self-contained (no file of the
// operator's may be named), then sanitized by its KubeConfig, which keeps only inline credentials, sets the request
// timeout and never falls back to the operator's own configuration. Where Flux silently drops an exec entry, an
// auth-provider or insecure-skip-tls-verify, this refuses the kubeconfig, so that the tenant learns why.
func (o RemoteOptions) restConfig(ctx context.Context, kubeconfig []byte, source string) (*rest.Config, error) {
	raw, err := o.loadAllowed(kubeconfig, source)
	if err != nil {
		return nil, err
	}
	if err := fluxclient.ValidateKubeConfig(raw); err != nil {
		return nil, outcome.Stallingf(konfidencev1.UnsafeKubeConfigReason, "%s: %v", source, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, outcome.Stallingf(konfidencev1.DeploymentResultFailedReason, "%s: %v", source, err)
	}
	if err := o.refuseUnsafe(cfg); err != nil {
		return nil, outcome.Stallingf(konfidencev1.UnsafeKubeConfigReason, "%s: %v", source, err)
	}
	// KubeConfig asks the target whether it has priority and fairness, with a request no timeout bounds but ctx.
	if timeout := o.requestTimeout(); timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return fluxclient.KubeConfig(ctx, cfg, o.KubeConfig), nil
}

// loadAllowed reads a kubeconfig and refuses it unless the operator allows its API server, before anything else
// is done with it.
func (o RemoteOptions) loadAllowed(kubeconfig []byte, source string) (*clientcmdapi.Config, error) {
	raw, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, outcome.Stallingf(konfidencev1.DeploymentResultFailedReason, "%s: %s", source, remoteText(err.Error()))
	}
	if err := o.allowServer(raw); err != nil {
		return nil, outcome.Stallingf(konfidencev1.RemoteTargetNotAllowedReason, "%s: %v", source, err)
	}
	return raw, nil
}

// allowServer refuses a kubeconfig unless remote targets are on and the API server of its current context (and
// the proxy it would be reached through) is among the allowed hosts. A tenant writes the kubeconfig: without this,
// any tenant makes the operator, and Flux, send requests to whatever address it names, internal ones included.
func (o RemoteOptions) allowServer(raw *clientcmdapi.Config) error {
	if err := o.enabled(); err != nil {
		return err
	}
	var cluster *clientcmdapi.Cluster
	if c, ok := raw.Contexts[raw.CurrentContext]; ok {
		cluster = raw.Clusters[c.Cluster]
	}
	if cluster == nil || cluster.Server == "" {
		return fmt.Errorf("the current context %q names no API server", remoteText(raw.CurrentContext))
	}
	if err := o.allowHost("API server", cluster.Server); err != nil {
		return err
	}
	if err := refusePath(cluster.Server); err != nil {
		return err
	}
	if cluster.ProxyURL != "" {
		return o.allowHost("proxy", cluster.ProxyURL)
	}
	return nil
}

// enabled refuses every remote target unless the platform allowed some.
func (o RemoteOptions) enabled() error {
	if len(o.AllowedTargetHosts) == 0 {
		return errors.New("remote targets are off: the operator deploys to remote clusters only with --allowed-target-hosts")
	}
	return nil
}

// allowHost refuses an address unless its host, or host:port, is listed in AllowedTargetHosts (case-insensitive).
// An address without a scheme is read as client-go reads one, as https.
func (o RemoteOptions) allowHost(what, address string) error {
	u, err := parseAddress(what, address)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(o.AllowedTargetHosts, func(h string) bool {
		return strings.EqualFold(h, u.Host) || strings.EqualFold(h, u.Hostname())
	}) {
		return nil
	}
	return fmt.Errorf("the %s %s is not among the allowed target hosts (--allowed-target-hosts)", what, remoteText(u.Host))
}

// parseAddress reads the address of an API server or a proxy as client-go reads one: without a scheme, as https.
func parseAddress(what, address string) (*url.URL, error) {
	if !strings.Contains(address, "://") {
		address = "https://" + address
	}
	u, err := url.Parse(address)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("the %s %q is not a URL", what, remoteText(address))
	}
	return u, nil
}

// refusePath refuses an API server URL with anything after the host but "/": a path, a query or a fragment. An
// API server is served at its root; a path would have every request go below it, e.g. through the allowed cluster's
// service proxy (/api/v1/namespaces/…/services/…/proxy) to a Service the tenant runs, which then answers, and
// redirects, as the tenant likes, with the credentials of the kubeconfig attached.
func refusePath(server string) error {
	u, err := parseAddress("API server", server)
	if err != nil {
		return err
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fmt.Errorf("the API server %s has a path, a query or a fragment (%q): an API server is named by scheme://host[:port] alone", remoteText(u.Host), remoteText(u.RequestURI()))
	}
	return nil
}

// refuseUnsafe refuses what would run a command or an auth plugin inside the operator, or skip TLS verification,
// unless the operator allowed it with Flux's flag.
func (o RemoteOptions) refuseUnsafe(cfg *rest.Config) error {
	switch {
	case cfg.ExecProvider != nil && !o.KubeConfig.InsecureExecProvider:
		return fmt.Errorf("the user's exec command %q is not run (the operator allows exec with --insecure-kubeconfig-exec); embed a token or a client certificate", cfg.ExecProvider.Command)
	case cfg.AuthProvider != nil:
		return fmt.Errorf("the user's auth-provider %q is not supported; embed a token or a client certificate", cfg.AuthProvider.Name)
	case cfg.Insecure && !o.KubeConfig.InsecureTLS:
		return errors.New("insecure-skip-tls-verify is not allowed (the operator allows it with --insecure-kubeconfig-tls); give certificate-authority-data")
	}
	return nil
}

// maxRemoteText bounds what of a remote target's or a kubeconfig's text a message repeats.
const maxRemoteText = 256

// remoteText is text a tenant or its target chose as a status, events and notifications may show it: plain,
// printable and bounded by maxRemoteText (sanitize.Bounded).
func remoteText(s string) string { return sanitize.Bounded(s, maxRemoteText) }

// remoteFailure is a failed request to a remote target as a status may show it. The target answers whatever it
// likes, and client-go puts up to 2 KiB of an error body (or a Status's message of any length) into its error; of
// an API error only the status code is kept, of a redirect not followed the host it pointed to, any other error's
// text is made printable. The cause
// stays underneath, for isTimeout.
func remoteFailure(err error) error {
	var (
		status  apierrors.APIStatus
		refused *redirectRefused
	)
	if errors.As(err, &refused) { // said without the request's URL in front, which may use up the bound
		return &redacted{msg: refused.Error(), cause: err}
	}
	if errors.As(err, &status) {
		code := status.Status().Code
		return &redacted{msg: fmt.Sprintf("the remote target answered HTTP %d %s", code, http.StatusText(int(code))), cause: err}
	}
	return &redacted{msg: remoteText(err.Error()), cause: err}
}

// redacted is an error shown by its message only, its cause kept for errors.Is and errors.As.
type redacted struct {
	msg   string
	cause error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.cause }

// isTimeout says whether err is a request that got no answer in time: the request timeout or the reconcile's
// deadline.
func isTimeout(err error) bool {
	var netErr net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout())
}

// checkTarget refuses a remote target the operator does not allow before any Flux object refers to it: Flux would
// apply there, and the deployer would read Services there. A kubeconfig Secret is read and its API server checked
// (again before each request, see restConfig, since the tenant may change it); a ConfigMap reference (cloud
// identity), which only the platform's deploymentTargets can give and which the deployer never calls, needs
// remote targets to be on.
func (r *Reconciler) checkTarget(ctx context.Context, ad *konfidencev1.ArtifactDeployment, t target) error {
	if t.kubeConfig == nil {
		return nil
	}
	if t.kubeConfig.SecretRef == nil {
		if err := r.remote.enabled(); err != nil {
			return outcome.Stallingf(konfidencev1.RemoteTargetNotAllowedReason, "the target of namespace %s (ConfigMap %s): %v", ad.Namespace, t.kubeConfig.ConfigMapRef.Name, err)
		}
		return nil
	}
	data, source, err := r.kubeConfig(ctx, ad.Namespace, t.kubeConfig.SecretRef)
	if err != nil {
		return err
	}
	_, err = r.remote.loadAllowed(data, source)
	return err
}

// kubeConfig reads a remote target's kubeconfig from its Secret, and names the Secret and key for messages.
func (r *Reconciler) kubeConfig(ctx context.Context, namespace string, ref *meta.SecretKeyReference) (data []byte, source string, err error) {
	secret := &corev1.Secret{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, secret); err != nil {
		return nil, "", outcome.Retrying(konfidencev1.DeploymentResultFailedReason, fmt.Errorf("reading kubeconfig Secret %s/%s: %w", namespace, ref.Name, err))
	}
	// The keys Flux reads when secretRef.key is empty.
	keys := []string{ref.Key}
	if ref.Key == "" {
		keys = []string{"value", "value.yaml"}
	}
	for _, k := range keys {
		if data, ok := secret.Data[k]; ok {
			return data, fmt.Sprintf("kubeconfig Secret %s/%s key %s", namespace, ref.Name, k), nil
		}
	}
	return nil, "", outcome.Stallingf(konfidencev1.DeploymentResultFailedReason, "kubeconfig Secret %s/%s has none of the keys %v", namespace, ref.Name, keys)
}
