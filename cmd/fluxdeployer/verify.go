package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm"
	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
)

func newVectorVerifyCommand() *cobra.Command {
	var publicKey, signature string
	var registry registryFlags
	cmd := &cobra.Command{
		Use:   "verify REF --public-key FILE [--signature NAME]",
		Short: "Verify a vector's OCM signature and the digests that pin its artifacts",
		Long: "Verifies, as a VectorDeployment with spec.verify does before deploying anything: the vector's signature\n" +
			"(RSASSA-PSS or RSASSA-PKCS1-V1_5 over SHA-256, normalisation jsonNormalisation/v4alpha1, v3 or v2) with the\n" +
			"PEM public key or certificate in FILE; each artifact's normalised descriptor against the digest the vector's\n" +
			"component reference pins; and each artifact resource's digest against its content (a local blob, or the\n" +
			"manifest an OCI artifact's reference names in its registry). With --signature, that signature must be\n" +
			"present and valid; without, a signature that verifies with the key must be. Exits non-zero with the reason\n" +
			"(SignatureMissing, SignatureInvalid, DigestMismatch, or a read failure) otherwise.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(publicKey)
			if err != nil {
				return err
			}
			key, err := signing.ParseTrustedKey(data)
			if err != nil {
				return fmt.Errorf("%s: %w", publicKey, err)
			}
			policy := ocm.TrustPolicy{Keys: signing.Keys{signature: key}}
			if signature != "" {
				policy.Signatures = []string{signature}
			}
			opts, err := registry.options()
			if err != nil {
				return err
			}
			client := ocm.NewClient(opts)
			v, err := client.ResolveVector(cmd.Context(), args[0], ocm.Read{})
			if err != nil {
				return err
			}
			if err := client.VerifyVector(cmd.Context(), v, policy, ocm.Read{}); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "verified %s:%s (%s) and its %d artifacts\n", v.Component, v.Version, v.Digest, len(v.Artifacts))
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&publicKey, "public-key", "", "PEM file of the RSA public key or certificate that verifies the signature")
	f.StringVar(&signature, "signature", "", "name of the signature that must verify; empty: any signature the key verifies")
	registry.bind(f)
	_ = cmd.MarkFlagRequired("public-key") // the flag exists
	return cmd
}
