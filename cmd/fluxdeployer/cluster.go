package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
)

// clusterFlags choose the API server, user and namespace of the commands that talk to a cluster, as kubectl and
// flux take them: --kubeconfig (else KUBECONFIG, else ~/.kube/config), --context (else the current context), -n
// (else the context's namespace, else default) and -A for every namespace.
type clusterFlags struct {
	kubeconfig, context, namespace string
	allNamespaces                  bool
}

func (c *clusterFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "path to the kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "kubeconfig context to use (default: the current context)")
	f.StringVarP(&c.namespace, "namespace", "n", "", "namespace (default: the kubeconfig context's, else default)")
	f.BoolVarP(&c.allNamespaces, "all-namespaces", "A", false, "every namespace (with --all, or without NAME)")
}

// cluster is a client of the API server the flags chose.
type cluster struct {
	client client.Client
	// namespace is the namespace the flags chose; empty with -A.
	namespace string
	server    string
	// config is the kubeconfig's user at the API server, for what needs more than a client (the web view's
	// informers).
	config *rest.Config
}

// connect reads the kubeconfig and builds a client. It sends nothing: errors of the API server come with the
// first request.
func (c *clusterFlags) connect() (*cluster, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.context}
	overrides.Context.Namespace = c.namespace
	loaded := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := loaded.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own message suggests KUBERNETES_MASTER, which nothing here reads.
		return nil, errors.New("no kubeconfig: set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config with a current context")
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	namespace, _, err := loaded.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if c.allNamespaces {
		namespace = ""
	}
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &cluster{client: cl, namespace: namespace, server: cfg.Host, config: cfg}, nil
}

// oneNamespace refuses -A for a command given a NAME, which names an object of one namespace.
func (c *clusterFlags) oneNamespace() error {
	if c.allNamespaces {
		return usageErrorf("-A/--all-namespaces lists every namespace; a NAME is looked up in one (-n)")
	}
	return nil
}

// explain words a failed request for a person: the API server's answer as it gives it, and a server that could
// not be reached with its address, rather than the REST mapper's wrapping of its discovery request.
func (c *cluster) explain(err error) error {
	var status apierrors.APIStatus
	var unreachable *url.Error
	switch {
	case err == nil || errors.As(err, &status):
		return err
	case errors.As(err, &unreachable):
		return fmt.Errorf("cannot reach the API server %s: %w", c.server, unreachable.Err)
	}
	return err
}

// objectKind is a kind the cluster commands act on by name.
type objectKind struct {
	kind      string
	newObject func() client.Object
	newList   func() client.ObjectList
}

var (
	vectorDeploymentKind = objectKind{"VectorDeployment",
		func() client.Object { return &konfidencev1.VectorDeployment{} },
		func() client.ObjectList { return &konfidencev1.VectorDeploymentList{} }}
	artifactDeploymentKind = objectKind{"ArtifactDeployment",
		func() client.Object { return &konfidencev1.ArtifactDeployment{} },
		func() client.ObjectList { return &konfidencev1.ArtifactDeploymentList{} }}
	stageKind = objectKind{"Stage",
		func() client.Object { return &konfidencev1.Stage{} },
		func() client.ObjectList { return &konfidencev1.StageList{} }}
)

// kindNames are the names a command line may give a kind by, kubectl's short names among them.
var kindNames = map[string]objectKind{
	"vd": vectorDeploymentKind, "vds": vectorDeploymentKind, "vectordeployment": vectorDeploymentKind, "vectordeployments": vectorDeploymentKind,
	"ad": artifactDeploymentKind, "ads": artifactDeploymentKind, "artifactdeployment": artifactDeploymentKind, "artifactdeployments": artifactDeploymentKind,
	"st": stageKind, "stage": stageKind, "stages": stageKind,
}

func parseKind(arg string) (objectKind, error) {
	if k, ok := kindNames[strings.ToLower(arg)]; ok {
		return k, nil
	}
	return objectKind{}, usageErrorf("unknown kind %q (want vd, ad or st)", arg)
}

// describe names an object for messages, as "VectorDeployment ns/name".
func (k objectKind) describe(obj client.Object) string {
	return k.kind + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// get reads the object of kind k named name in the chosen namespace.
func (c *cluster) get(ctx context.Context, k objectKind, name string) (client.Object, error) {
	obj := k.newObject()
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%s %s/%s not found", k.kind, c.namespace, name)
		}
		return nil, c.explain(err)
	}
	return obj, nil
}

// list reads every object of kind k in the chosen namespace, or in every namespace with -A.
func (c *cluster) list(ctx context.Context, k objectKind) ([]client.Object, error) {
	list := k.newList()
	if err := c.client.List(ctx, list, client.InNamespace(c.namespace)); err != nil {
		return nil, c.explain(err)
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	objs := make([]client.Object, len(items))
	for i, item := range items {
		objs[i] = item.(client.Object)
	}
	return objs, nil
}
