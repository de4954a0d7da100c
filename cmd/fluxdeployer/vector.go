package main

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"oras.land/oras-go/v2/registry/remote/credentials"

	konfidencev1 "github.com/fluxdeployer/fluxdeployer/api/v1alpha1"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment"
	"github.com/fluxdeployer/fluxdeployer/pkg/sanitize"
)

func newVectorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vector",
		Short: "Work with OCM vectors",
		// Without a Run, cobra answers a misspelt subcommand with the help and exit 0.
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newVectorInspectCommand(), newVectorVerifyCommand())
	return cmd
}

// inspectedArtifact is one artifact of `vector inspect -o json`; the field names are part of the CLI's output
// contract.
type inspectedArtifact struct {
	Component  string              `json:"component"`
	Version    string              `json:"version"`
	Type       string              `json:"type,omitempty"`
	AllowReuse bool                `json:"allowReuse"`
	Name       string              `json:"name,omitempty"`
	Hash       string              `json:"hash,omitempty"`
	Tasks      []ocm.Task          `json:"tasks"`
	Resources  []inspectedResource `json:"resources"`
	// Reason and Error say why the operator would deploy no ArtifactDeployment for the artifact, with the reason
	// the VectorDeployment's status would give; the vector's other artifacts still deploy.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
}

type inspectedResource struct {
	Name   string          `json:"name"`
	Type   string          `json:"type"`
	Access json.RawMessage `json:"access"`
	// Digest is the content digest the deployer pins the resource by, when the descriptor records one.
	Digest string `json:"digest,omitempty"`
}

// inspection is the output of `vector inspect -o json|yaml`.
type inspection struct {
	Vector string `json:"vector"`
	// UID is the VectorDeployment UID non-reusable artifacts are named for; UIDPlaceholder marks render's
	// placeholder, used when --uid is not given.
	UID            string              `json:"uid"`
	UIDPlaceholder bool                `json:"uidPlaceholder,omitempty"`
	Artifacts      []inspectedArtifact `json:"artifacts"`
}

func newVectorInspectCommand() *cobra.Command {
	var uid string
	var output *outputFormat
	var registry registryFlags
	cmd := &cobra.Command{
		Use:   "inspect REF [--uid U] [-o table|json|yaml]",
		Short: "Resolve a vector and print its artifacts",
		Long: "Resolves an OCM vector reference, e.g. http://localhost:5000//acme.org/vectors/shop:1.0.0 (registry) or\n" +
			"ctf::./ctf//acme.org/vectors/shop:1.0.0 (CTF directory), and prints for each artifact its component, version,\n" +
			"deployer type, allowReuse, the ArtifactDeployment name it gets, its tasks and its resources, or why the operator\n" +
			"would deploy none for it (the others still deploy; the command then exits 1). --uid stands in for the\n" +
			"VectorDeployment UID, which names artifacts that disable reuse; without it they are named for the placeholder\n" +
			"UID " + string(placeholderUID) + ", as render names them.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := registry.options()
			if err != nil {
				return err
			}
			v, err := ocm.NewClient(opts).ResolveVector(cmd.Context(), args[0], ocm.Read{})
			if v == nil {
				return err
			}
			result, err := inspect(args[0], v, uid)
			if err != nil {
				return err
			}
			if output.structured() {
				err = printStructured(cmd.OutOrStdout(), output.value, result)
			} else {
				err = printArtifactTable(cmd.OutOrStdout(), result)
			}
			if err != nil {
				return err
			}
			return failedArtifacts(result.Artifacts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&uid, "uid", "", "VectorDeployment UID, for artifacts that disable reuse (default: the placeholder "+string(placeholderUID)+")")
	output = bindOutput(f, outputTable, "output format: table, json or yaml", outputTable, outputJSON, outputYAML)
	registry.bind(f)
	return cmd
}

// registryFlags are the registry access flags of the commands that read vectors.
type registryFlags struct {
	caFile, dockerConfig    string
	insecureCredentialHosts []string
}

func (r *registryFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&r.caFile, "ca-file", "", "PEM file of CAs to trust for registry TLS, instead of the system pool")
	f.StringVar(&r.dockerConfig, "docker-config", "", "docker config.json with registry credentials (auths, and the credential helpers of credsStore and credHelpers)")
	f.StringSliceVar(&r.insecureCredentialHosts, "insecure-registry-credentials-hosts", nil,
		"registry hosts (host[:port]) credentials may be sent to over plain HTTP (http:// references); to others they are sent over TLS only")
}

// options returns the OCM client options the flags ask for.
func (r *registryFlags) options() (ocm.Options, error) {
	opts, err := clientOptions(r.caFile, r.dockerConfig)
	opts.InsecureCredentialHosts = r.insecureCredentialHosts
	return opts, err
}

func clientOptions(caFile, dockerConfig string) (ocm.Options, error) {
	var opts ocm.Options
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return opts, err
		}
		opts.RootCAs = x509.NewCertPool()
		if !opts.RootCAs.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("no PEM certificates in %s", caFile)
		}
	}
	if dockerConfig != "" {
		// oras reads the file as docker does, including the credential helpers it names; it takes a missing file
		// for an empty one, which here would be a typo.
		if _, err := os.Stat(dockerConfig); err != nil {
			return opts, err
		}
		store, err := credentials.NewStore(dockerConfig, credentials.StoreOptions{})
		if err != nil {
			return opts, fmt.Errorf("%s: %w", dockerConfig, err)
		}
		opts.CredentialStore = store
	}
	return opts, nil
}

// inspect names every artifact of v as the reconciler would for a VectorDeployment of UID uid (the placeholder
// when empty), through the builder render uses, and reports each failed artifact with its reason.
func inspect(ref string, v *ocm.Vector, uid string) (inspection, error) {
	result := inspection{Vector: ref, UID: uid, Artifacts: make([]inspectedArtifact, 0, len(v.Artifacts))}
	if uid == "" {
		result.UID, result.UIDPlaceholder = string(placeholderUID), true
	}
	scheme, err := newScheme()
	if err != nil {
		return result, err
	}
	vd := &konfidencev1.VectorDeployment{ObjectMeta: metav1.ObjectMeta{UID: types.UID(result.UID)}, Spec: konfidencev1.VectorDeploymentSpec{Vector: ref}}
	for i, d := range desiredArtifacts(scheme, vd, vectordeployment.ArtifactsOf(v)) {
		result.Artifacts = append(result.Artifacts, inspectArtifact(d, v.Artifacts[i].Artifact))
	}
	return result, nil
}

func inspectArtifact(d desiredArtifact, a *ocm.Artifact) inspectedArtifact {
	ia := inspectedArtifact{
		Component: d.Component, Version: strings.TrimPrefix(d.Ref, d.Component+":"),
		Tasks: []ocm.Task{}, Resources: []inspectedResource{},
	}
	if a != nil {
		ia.Version, ia.Type, ia.AllowReuse = a.Version, a.Type, a.AllowReuse
		ia.Tasks = append(ia.Tasks, a.Tasks...)
		for _, r := range a.Resources {
			ia.Resources = append(ia.Resources, inspectedResource{Name: r.Name, Type: r.Type, Access: r.Access, Digest: r.Digest})
		}
	}
	if d.Err != nil {
		ia.Reason, ia.Error = vectordeployment.FailureReason(d.Err), d.Err.Error()
		return ia
	}
	ia.Name, ia.Hash = d.deployment.Name, d.deployment.Annotations[konfidencev1.ArtifactHashAnnotation]
	return ia
}

// failedArtifacts is the error of an inspection in which some artifact would not deploy.
func failedArtifacts(artifacts []inspectedArtifact) error {
	failed := 0
	for _, a := range artifacts {
		if a.Error != "" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d artifacts would not deploy", failed, len(artifacts))
	}
	return nil
}

func printArtifactTable(out io.Writer, result inspection) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0) // buffers: Flush reports any write error
	_, _ = fmt.Fprintln(w, "COMPONENT\tVERSION\tTYPE\tREUSE\tNAME\tTASKS\tRESOURCES\tSTATUS")
	placeholderNamed := false
	for _, a := range result.Artifacts {
		tasks := make([]string, 0, len(a.Tasks))
		for _, t := range a.Tasks {
			tasks = append(tasks, t.Name)
		}
		resources := make([]string, 0, len(a.Resources))
		for _, r := range a.Resources {
			resources = append(resources, r.Name+"("+r.Type+")"+shortDigest(r.Digest))
		}
		status := "ok"
		if a.Error != "" {
			status = withReason(a.Reason, a.Error)
		}
		placeholderNamed = placeholderNamed || (result.UIDPlaceholder && a.Name != "" && !a.AllowReuse)
		// Everything but the name and the flag is the descriptor's or the registry's text.
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\t%s\t%s\n", sanitize.Printable(a.Component), sanitize.Printable(a.Version),
			orDash(sanitize.Printable(a.Type)), a.AllowReuse, orDash(a.Name), orDash(sanitize.Printable(strings.Join(tasks, ","))),
			orDash(sanitize.Printable(strings.Join(resources, ","))), sanitize.Printable(status))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if placeholderNamed {
		_, err := fmt.Fprintf(out, "Non-reusable artifacts are named for the placeholder VectorDeployment UID %s (--uid), as render names them.\n", placeholderUID)
		return err
	}
	return nil
}

// withReason is a failure as "Reason: message", once: the registry reader's errors already begin with their
// reason.
func withReason(reason, message string) string {
	if strings.HasPrefix(message, reason+": ") {
		return message
	}
	return reason + ": " + message
}

// shortDigest abbreviates a pinned digest for the table as "@sha256:" and 12 hex digits, as docker shortens IDs.
func shortDigest(digest string) string {
	const short = len("sha256:") + 12
	if len(digest) > short {
		digest = digest[:short]
	}
	if digest == "" {
		return ""
	}
	return "@" + digest
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
