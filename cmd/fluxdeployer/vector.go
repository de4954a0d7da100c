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
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/vectordeployment/naming"
)

func newVectorCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "vector",
		Short: "Work with OCM vectors",
	}
	cmd.AddCommand(newVectorInspectCommand(), newVectorVerifyCommand())
	return cmd
}

// inspectedArtifact is one artifact of `vector inspect -o json`; the field names are part of the CLI's output
// contract.
type inspectedArtifact struct {
	Component  string              `json:"component"`
	Version    string              `json:"version"`
	Type       string              `json:"type"`
	AllowReuse bool                `json:"allowReuse"`
	Name       string              `json:"name"`
	Hash       string              `json:"hash"`
	Tasks      []ocm.Task          `json:"tasks"`
	Resources  []inspectedResource `json:"resources"`
}

type inspectedResource struct {
	Name   string          `json:"name"`
	Type   string          `json:"type"`
	Access json.RawMessage `json:"access"`
	// Digest is the content digest the deployer pins the resource by, when the descriptor records one.
	Digest string `json:"digest,omitempty"`
}

func newVectorInspectCommand() *cobra.Command {
	var uid, output string
	var registry registryFlags
	cmd := &cobra.Command{
		Use:   "inspect REF [--uid U] [-o json|table]",
		Short: "Resolve a vector and print its artifacts",
		Long: "Resolves an OCM vector reference, e.g. http://localhost:5000//acme.org/vectors/shop:1.0.0 (registry) or\n" +
			"ctf::./ctf//acme.org/vectors/shop:1.0.0 (CTF directory), and prints for each artifact its component, version,\n" +
			"deployer type, allowReuse, the ArtifactDeployment name it gets, its tasks and its resources. --uid stands in\n" +
			"for the VectorDeployment UID, which names artifacts that disable reuse.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != outputJSON && output != outputTable {
				return fmt.Errorf("unknown output format %q (want json or table)", output)
			}
			opts, err := registry.options()
			if err != nil {
				return err
			}
			v, err := ocm.NewClient(opts).ResolveVector(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			artifacts := make([]inspectedArtifact, 0, len(v.Artifacts))
			for _, a := range v.Artifacts {
				ia, err := inspectArtifact(a, uid)
				if err != nil {
					return err
				}
				artifacts = append(artifacts, ia)
			}
			if output == outputJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(struct {
					Vector    string              `json:"vector"`
					Artifacts []inspectedArtifact `json:"artifacts"`
				}{args[0], artifacts})
			}
			return printArtifactTable(cmd.OutOrStdout(), artifacts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&uid, "uid", "", "VectorDeployment UID, for artifacts that disable reuse")
	f.StringVarP(&output, "output", "o", outputTable, "output format: json or table")
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

func inspectArtifact(a *ocm.Artifact, uid string) (inspectedArtifact, error) {
	if a.AllowReuse {
		uid = "" // reusable artifacts are shared across VectorDeployments, so their name must not depend on one
	}
	name, hash, err := naming.ArtifactDeploymentName(a.Component, a.Version, uid, 0)
	if err != nil {
		return inspectedArtifact{}, err
	}
	ia := inspectedArtifact{
		Component: a.Component, Version: a.Version, Type: a.Type, AllowReuse: a.AllowReuse, Name: name, Hash: hash,
		Tasks:     append([]ocm.Task{}, a.Tasks...),
		Resources: make([]inspectedResource, 0, len(a.Resources)),
	}
	for _, r := range a.Resources {
		ia.Resources = append(ia.Resources, inspectedResource{Name: r.Name, Type: r.Type, Access: r.Access, Digest: r.Digest})
	}
	return ia, nil
}

func printArtifactTable(out io.Writer, artifacts []inspectedArtifact) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0) // buffers: Flush reports any write error
	_, _ = fmt.Fprintln(w, "COMPONENT\tVERSION\tTYPE\tREUSE\tNAME\tTASKS\tRESOURCES")
	for _, a := range artifacts {
		tasks := make([]string, 0, len(a.Tasks))
		for _, t := range a.Tasks {
			tasks = append(tasks, t.Name)
		}
		resources := make([]string, 0, len(a.Resources))
		for _, r := range a.Resources {
			resources = append(resources, r.Name+"("+r.Type+")"+shortDigest(r.Digest))
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%t\t%s\t%s\t%s\n", a.Component, a.Version, a.Type, a.AllowReuse, a.Name,
			orDash(strings.Join(tasks, ",")), orDash(strings.Join(resources, ",")))
	}
	return w.Flush()
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
