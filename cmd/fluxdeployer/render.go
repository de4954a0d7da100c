package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/fluxdeployer"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
)

// placeholderUID stands in for UIDs the API server has not assigned: the VectorDeployment's when render's or vector
// inspect's --uid is not given (so both name non-reusable artifacts alike), a VectorDeployment diff plans, and
// every ArtifactDeployment's in its Flux objects' owner references.
const placeholderUID types.UID = "00000000-0000-0000-0000-000000000000"

type renderOptions struct {
	namespace, name, uid string
	output               *outputFormat
	configFile           string
	secrets              []string
	registry             registryFlags
}

func newRenderCommand() *cobra.Command {
	var o renderOptions
	cmd := &cobra.Command{
		Use:   "render REF --namespace NS [--uid UID] [-o yaml|json]",
		Short: "Print the ArtifactDeployments and Flux objects a VectorDeployment of a vector would create",
		Long: "Resolves the vector REF (a registry or a CTF directory, as vector inspect) and prints, without a cluster, the\n" +
			"ArtifactDeployments a VectorDeployment for it in namespace NS would create and the Flux objects each becomes, built\n" +
			"by the reconcilers' own code, ready for kubectl diff -f - or kubectl apply --dry-run=server -f -.\n" +
			"It assumes a fresh namespace: no ArtifactDeployment there yet (no collision counts, each reusable artifact owned\n" +
			"by this VectorDeployment alone) and no Secret but those named with --secret. UIDs the API server assigns are\n" +
			"placeholders: --uid gives the VectorDeployment's (non-reusable artifacts are named after it).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "namespace of the VectorDeployment")
	f.StringVar(&o.name, "name", "", "name of the VectorDeployment (default: the vector component's last path segment)")
	f.StringVar(&o.uid, "uid", "", "UID of the VectorDeployment (default: a placeholder)")
	o.output = bindOutput(f, outputYAML, "output format: yaml (one document per object) or json (a v1 List)", outputYAML, outputJSON)
	f.StringVar(&o.configFile, "flux-deployer-config", "", "YAML file of the Flux deployer's ConfigMap (default: no ConfigMap, the defaults)")
	f.StringSliceVar(&o.secrets, "secret", nil, "Secret to assume exists in the namespace (pull Secrets and the kubeconfig Secret are referenced only when they exist)")
	o.registry.bind(f)
	_ = cmd.MarkFlagRequired("namespace")
	return cmd
}

func (o renderOptions) run(cmd *cobra.Command, ref string) error {
	if msgs := apivalidation.ValidateNamespaceName(o.namespace, false); len(msgs) > 0 {
		return usageErrorf("--namespace %q: %s", o.namespace, strings.Join(msgs, "; "))
	}
	if err := validateName(o.name, "--name"); err != nil {
		return err
	}
	configData, err := readConfigData(o.configFile)
	if err != nil {
		return err
	}
	if err := fluxdeployer.ValidateConfig(configData); err != nil {
		return fmt.Errorf("%s: %w", o.configFile, err)
	}
	opts, err := o.registry.options()
	if err != nil {
		return err
	}
	v, err := ocm.NewClient(opts).ResolveVector(cmd.Context(), ref, ocm.Read{})
	if v == nil {
		return err
	}
	vd := o.vectorDeployment(ref, v.Component)
	if o.name == "" {
		if err := validateName(vd.Name, "the vector component's last path segment, the default of --name,"); err != nil {
			return err
		}
	}
	objects, err := render(vd, vectordeployment.ArtifactsOf(v), configData, o.secrets)
	if err != nil {
		return err
	}
	if o.output.value == outputJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"apiVersion": "v1", "kind": "List", "items": objects})
	}
	return printYAML(cmd.OutOrStdout(), o.header(vd), objects)
}

// validateName refuses a VectorDeployment name the API server would refuse (a DNS-1123 subdomain), as a usage
// error; empty passes.
func validateName(name, what string) error {
	if name == "" {
		return nil
	}
	if msgs := apivalidation.NameIsDNSSubdomain(name, false); len(msgs) > 0 {
		return usageErrorf("%s %q is no VectorDeployment name: %s", what, name, strings.Join(msgs, "; "))
	}
	return nil
}

// vectorDeployment is the VectorDeployment the rendered objects belong to, as the API server would hold it.
func (o renderOptions) vectorDeployment(ref, component string) *konfidencev1.VectorDeployment {
	vd := &konfidencev1.VectorDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, UID: types.UID(o.uid)},
		Spec:       konfidencev1.VectorDeploymentSpec{Vector: ref},
	}
	if vd.Name == "" {
		vd.Name = path.Base(component)
	}
	if vd.UID == "" {
		vd.UID = placeholderUID
	}
	return vd
}

// render builds each artifact's ArtifactDeployment with the VectorDeployment reconciler's code and its Flux objects
// with the Flux deployer's, as both would in a fresh namespace. An artifact that cannot be read or built fails the
// whole render: a preview that silently drops one would mislead.
func render(vd *konfidencev1.VectorDeployment, artifacts []vectordeployment.ResolvedArtifact, configData map[string]string, secrets []string) ([]*unstructured.Unstructured, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	var errs []error
	for _, d := range desiredArtifacts(scheme, vd, artifacts) {
		if d.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.Ref, d.Err))
			continue
		}
		ad := d.deployment
		u, err := asCreated(scheme, ad)
		if err != nil {
			return nil, err
		}
		// The Flux objects' owner is the ArtifactDeployment, whose UID the API server has not assigned yet.
		owner := ad.DeepCopy()
		owner.UID = placeholderUID
		flux, err := fluxdeployer.DesiredObjects(owner, configData, func(name string) bool { return slices.Contains(secrets, name) })
		if err != nil {
			errs = append(errs, fmt.Errorf("ArtifactDeployment %s: %w", ad.Name, err))
			continue
		}
		out = append(append(out, u), flux...)
	}
	return out, errors.Join(errs...)
}

// desiredArtifact is one artifact of a vector with the ArtifactDeployment the VectorDeployment reconciler would
// create for it, or, in Err, why it would create none (the artifact could not be read, or no ArtifactDeployment
// can be built from it).
type desiredArtifact struct {
	vectordeployment.ResolvedArtifact
	deployment *konfidencev1.ArtifactDeployment
}

// desiredArtifacts builds each artifact's ArtifactDeployment with the reconciler's own code, as it would for vd in
// a fresh slot (collision count 0). render, vector inspect and diff all name artifacts through it.
func desiredArtifacts(scheme *runtime.Scheme, vd *konfidencev1.VectorDeployment, artifacts []vectordeployment.ResolvedArtifact) []desiredArtifact {
	out := make([]desiredArtifact, len(artifacts))
	for i, ra := range artifacts {
		out[i].ResolvedArtifact = ra
		if ra.Err == nil {
			out[i].deployment, out[i].Err = vectordeployment.DesiredArtifactDeployment(scheme, vd, ra.Artifact, 0)
		}
	}
	return out
}

// asCreated is obj as sent to the API server on creation: with its kind, without status and timestamps.
func asCreated(scheme *runtime.Scheme, obj runtime.Object) (*unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// readConfigData reads the data of a ConfigMap manifest; no file means no ConfigMap.
func readConfigData(file string) (map[string]string, error) {
	if file == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(raw, cm); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return cm.Data, nil
}

// header says, as YAML comments, what the rendered objects assume about the cluster.
func (o renderOptions) header(vd *konfidencev1.VectorDeployment) string {
	lines := []string{
		fmt.Sprintf("fluxdeployer render: what VectorDeployment %s/%s of %s creates in a fresh namespace:", vd.Namespace, vd.Name, vd.Spec.Vector),
		"no ArtifactDeployment there yet (collision counts 0, reusable ones owned by this VectorDeployment alone),",
		fmt.Sprintf("Secrets: %s.", orNone(o.secrets)),
		fmt.Sprintf("Owner references to ArtifactDeployments carry the placeholder UID %s.", placeholderUID),
	}
	if o.uid == "" {
		lines = append(lines, fmt.Sprintf("VectorDeployment UID not given (--uid): placeholder %s; non-reusable artifacts get other names in a cluster.", placeholderUID))
	}
	return "# " + strings.Join(lines, "\n# ") + "\n"
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func printYAML(out io.Writer, header string, objects []*unstructured.Unstructured) error {
	var b strings.Builder
	b.WriteString(header)
	for _, u := range objects {
		y, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	_, err := io.WriteString(out, b.String())
	return err
}
