package signing_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/fluxdeployer/fluxdeployer/internal/ocm/signing"
)

// TestNormaliseMatchesOCM checks the normalisation against bytes real OCM produced for a real component version.
func TestNormaliseMatchesOCM(t *testing.T) {
	input, err := os.ReadFile("testdata/ocm-conformance-v3-01/input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/ocm-conformance-v3-01/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	descriptor, err := yaml.YAMLToJSON(input)
	if err != nil {
		t.Fatal(err)
	}
	for _, algorithm := range []string{signing.NormalisationV3, signing.NormalisationV4alpha1, signing.NormalisationV2} {
		got, err := signing.Normalise(descriptor, algorithm)
		if err != nil {
			t.Fatal(err)
		}
		// The vector has no resources of equal identity, so v2's legacy defaulting changes nothing either.
		if !bytes.Equal(got, bytes.TrimSpace(want)) {
			t.Errorf("%s:\n got %s\nwant %s", algorithm, got, want)
		}
	}
}

// TestNormaliseV2DefaultsVersionIntoIdentity: a resource that shares name and extra identity with another gets its
// version into its identity under v2 only. As in OCM v1's loop, the first one's change ends the clash, so the
// second keeps its identity.
func TestNormaliseV2DefaultsVersionIntoIdentity(t *testing.T) {
	d := []byte(`{"meta":{"schemaVersion":"v2"},"component":{"name":"acme.org/x","version":"1.0.0","provider":"acme",
		"resources":[{"name":"r","version":"1","type":"t","relation":"local"},{"name":"r","version":"2","type":"t","relation":"local"}]}}`)
	v2, err := signing.Normalise(d, signing.NormalisationV2)
	if err != nil {
		t.Fatal(err)
	}
	v3, err := signing.Normalise(d, signing.NormalisationV3)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(v2), `"extraIdentity":{"version":"1"}`) || strings.Count(string(v2), "extraIdentity") != 1 {
		t.Errorf("v2 did not default versions into the identities: %s", v2)
	}
	if strings.Contains(string(v3), "extraIdentity") {
		t.Errorf("v3 defaulted identities: %s", v3)
	}
}

func TestNormaliseRejectsUnknownAlgorithm(t *testing.T) {
	if _, err := signing.Normalise(descriptor(t), "jsonNormalisation/v1"); err == nil {
		t.Fatal("jsonNormalisation/v1 accepted")
	}
	if _, err := signing.Digest(descriptor(t), signing.NormalisationV4alpha1, "SHA-1"); err == nil {
		t.Fatal("SHA-1 accepted")
	}
}

// TestSignVerifyEachAlgorithm signs with each algorithm, encoding and normalisation and verifies.
func TestSignVerifyEachAlgorithm(t *testing.T) {
	key := newKey(t)
	for _, algorithm := range []string{signing.AlgorithmRSASSAPSS, signing.AlgorithmRSASSAPKCS1V15} {
		plain := signing.MediaTypeRSAPSS
		if algorithm == signing.AlgorithmRSASSAPKCS1V15 {
			plain = signing.MediaTypeRSA
		}
		for _, mediaType := range []string{signing.MediaTypePEM, plain} {
			for _, norm := range []string{signing.NormalisationV4alpha1, signing.NormalisationV3, signing.NormalisationV2} {
				t.Run(algorithm+"/"+mediaType+"/"+norm, func(t *testing.T) {
					signed, err := signing.Sign(descriptor(t), "acme", key, signing.SignOptions{Algorithm: algorithm, MediaType: mediaType, Normalisation: norm})
					if err != nil {
						t.Fatal(err)
					}
					names, err := signing.Verify(signed, []string{"acme"}, keysOf(t, "acme", &key.PublicKey))
					if err != nil || len(names) != 1 {
						t.Fatalf("verify: %v %v", names, err)
					}
					if _, err := signing.Verify(signed, nil, keysOf(t, "acme", &newKey(t).PublicKey)); !errors.Is(err, signing.ErrSignatureInvalid) {
						t.Fatalf("another key verified: %v", err)
					}
				})
			}
		}
	}
}

// TestTamperingCoveredFields changes each field the signature covers: verification must fail.
func TestTamperingCoveredFields(t *testing.T) {
	key := newKey(t)
	signed, err := signing.Sign(descriptor(t), "acme", key, signing.SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := keysOf(t, "acme", &key.PublicKey)
	for name, tamper := range map[string]func(d map[string]any){
		"component name":         func(d map[string]any) { comp(d)["name"] = "acme.org/other" },
		"component version":      func(d map[string]any) { comp(d)["version"] = "9.9.9" },
		"provider":               func(d map[string]any) { comp(d)["provider"] = "mallory" },
		"creationTime":           func(d map[string]any) { comp(d)["creationTime"] = "2030-01-01T00:00:00Z" },
		"signing label value":    func(d map[string]any) { label(comp(d))["value"] = "changed" },
		"resource name":          func(d map[string]any) { res(d)["name"] = "other" },
		"resource version":       func(d map[string]any) { res(d)["version"] = "6.6.6" },
		"resource type":          func(d map[string]any) { res(d)["type"] = "kustomize" },
		"resource relation":      func(d map[string]any) { res(d)["relation"] = "local" },
		"resource extraIdentity": func(d map[string]any) { res(d)["extraIdentity"] = map[string]any{"os": "linux"} },
		"resource digest":        func(d map[string]any) { res(d)["digest"].(map[string]any)["value"] = strings.Repeat("0", 64) },
		"resource added": func(d map[string]any) {
			comp(d)["resources"] = append(comp(d)["resources"].([]any), map[string]any{"name": "extra", "version": "1", "type": "t", "relation": "local"})
		},
		"source name":         func(d map[string]any) { comp(d)["sources"].([]any)[0].(map[string]any)["name"] = "other" },
		"reference version":   func(d map[string]any) { ref(d)["version"] = "2.0.0" },
		"reference component": func(d map[string]any) { ref(d)["componentName"] = "acme.org/evil" },
		"reference digest":    func(d map[string]any) { ref(d)["digest"].(map[string]any)["value"] = strings.Repeat("1", 64) },
		"reference label":     func(d map[string]any) { label(ref(d))["value"] = "changed" },
		"signed digest":       func(d map[string]any) { sig(d)["digest"].(map[string]any)["value"] = strings.Repeat("2", 64) },
		"signature value":     func(d map[string]any) { flipPEM(sig(d)["signature"].(map[string]any)) },
		"signature algorithm": func(d map[string]any) {
			sig(d)["signature"].(map[string]any)["algorithm"] = signing.AlgorithmRSASSAPKCS1V15
		},
		"unknown normalisation": func(d map[string]any) {
			sig(d)["digest"].(map[string]any)["normalisationAlgorithm"] = "jsonNormalisation/v9"
		},
	} {
		t.Run(name, func(t *testing.T) {
			tampered := edit(t, signed, tamper)
			if _, err := signing.Verify(tampered, []string{"acme"}, keys); !errors.Is(err, signing.ErrSignatureInvalid) {
				t.Fatalf("tampered descriptor: got %v, want %v", err, signing.ErrSignatureInvalid)
			}
		})
	}
}

// TestExcludedFieldsKeepVerifying changes fields outside the signature: verification must still pass.
func TestExcludedFieldsKeepVerifying(t *testing.T) {
	key := newKey(t)
	signed, err := signing.Sign(descriptor(t), "acme", key, signing.SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys := keysOf(t, "acme", &key.PublicKey)
	for name, change := range map[string]func(d map[string]any){
		"resource access": func(d map[string]any) {
			res(d)["access"] = map[string]any{"type": "ociArtifact", "imageReference": "mirror.example/podinfo:6.9.1"}
		},
		"repositoryContexts": func(d map[string]any) {
			comp(d)["repositoryContexts"] = []any{map[string]any{"type": "OCIRegistry", "baseUrl": "mirror.example"}}
		},
		"non-signing label": func(d map[string]any) {
			comp(d)["labels"] = append(comp(d)["labels"].([]any), map[string]any{"name": "note", "value": "x"})
		},
		"source access": func(d map[string]any) {
			comp(d)["sources"].([]any)[0].(map[string]any)["access"] = map[string]any{"type": "gitHub", "commit": "abc"}
		},
		"meta": func(d map[string]any) { d["meta"] = map[string]any{"schemaVersion": "v2", "extra": true} },
		"another signature": func(d map[string]any) {
			d["signatures"] = append(d["signatures"].([]any), map[string]any{"name": "other"})
		},
		"null resources list":   func(d map[string]any) { comp(d)["sources"] = []any{}; comp(d)["sources"] = nil },
		"unknown field":         func(d map[string]any) { comp(d)["x-unknown"] = "ignored by OCM's v2 types" },
		"empty extra identity":  func(d map[string]any) { ref(d)["extraIdentity"] = map[string]any{} },
		"provider object label": func(d map[string]any) { comp(d)["provider"] = `{"name":"acme","labels":[{"name":"n","value":1}]}` },
	} {
		t.Run(name, func(t *testing.T) {
			base := signed
			if name == "null resources list" {
				// sources are empty in the signed document for this case, so null and [] must agree.
				var err error
				if base, err = signing.Sign(edit(t, signed, func(d map[string]any) { comp(d)["sources"] = []any{} }), "acme", key, signing.SignOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := signing.Verify(edit(t, base, change), []string{"acme"}, keys); err != nil {
				t.Fatalf("a change outside the signature broke verification: %v", err)
			}
		})
	}
}

func TestVerifyMissing(t *testing.T) {
	key := newKey(t)
	signed, err := signing.Sign(descriptor(t), "acme", key, signing.SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		doc   []byte
		names []string
		keys  signing.Keys
	}{
		"unsigned":              {descriptor(t), nil, keysOf(t, signing.AnyName, &key.PublicKey)},
		"other name required":   {signed, []string{"other"}, keysOf(t, "other", &key.PublicKey)},
		"no key for the name":   {signed, nil, keysOf(t, "other", &key.PublicKey)},
		"required name has key": {signed, []string{"other"}, keysOf(t, signing.AnyName, &key.PublicKey)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := signing.Verify(c.doc, c.names, c.keys); !errors.Is(err, signing.ErrSignatureMissing) {
				t.Fatalf("got %v, want %v", err, signing.ErrSignatureMissing)
			}
		})
	}
	if _, err := signing.Verify(signed, nil, keysOf(t, signing.AnyName, &key.PublicKey)); err != nil {
		t.Fatalf("a key for any name: %v", err)
	}
}

// TestVerifyCertificates: a certificate as the trusted key, the issuer it names, and a signer certificate chained
// to a trusted CA.
func TestVerifyCertificates(t *testing.T) {
	caKey, signerKey := newKey(t), newKey(t)
	ca := certificate(t, "acme CA", caKey, nil, nil)
	signer := certificate(t, "acme signer", signerKey, ca, caKey)
	trustCA := signing.Keys{"acme": {PublicKey: &caKey.PublicKey, Certificate: ca}}
	trustSigner := signing.Keys{"acme": {PublicKey: &signerKey.PublicKey, Certificate: signer}}

	chained, err := signing.Sign(descriptor(t), "acme", signerKey, signing.SignOptions{Certificate: signer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signing.Verify(chained, nil, trustCA); err != nil {
		t.Fatalf("signer chained to the trusted CA: %v", err)
	}
	if _, err := signing.Verify(chained, nil, trustSigner); err != nil {
		t.Fatalf("signer certificate trusted itself: %v", err)
	}
	other := newKey(t)
	rogue := certificate(t, "acme signer", other, certificate(t, "rogue CA", other, nil, nil), other)
	forged, err := signing.Sign(descriptor(t), "acme", other, signing.SignOptions{Certificate: rogue})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signing.Verify(forged, nil, trustCA); !errors.Is(err, signing.ErrSignatureInvalid) {
		t.Fatalf("certificate from another CA: got %v", err)
	}
	wrongIssuer := edit(t, chained, func(d map[string]any) { sig(d)["signature"].(map[string]any)["issuer"] = "CN=someone else" })
	if _, err := signing.Verify(wrongIssuer, nil, trustCA); !errors.Is(err, signing.ErrSignatureInvalid) {
		t.Fatalf("wrong issuer: got %v", err)
	}
	// OCM v1 style: a plain signature verified by the signer's own certificate, the issuer naming its subject.
	plain, err := signing.Sign(descriptor(t), "acme", signerKey, signing.SignOptions{MediaType: signing.MediaTypeRSAPSS})
	if err != nil {
		t.Fatal(err)
	}
	named := edit(t, plain, func(d map[string]any) { sig(d)["signature"].(map[string]any)["issuer"] = "CN=acme signer" })
	if _, err := signing.Verify(named, nil, trustSigner); err != nil {
		t.Fatalf("issuer naming the certificate: %v", err)
	}
	misnamed := edit(t, plain, func(d map[string]any) { sig(d)["signature"].(map[string]any)["issuer"] = "CN=acme CA" })
	if _, err := signing.Verify(misnamed, nil, trustSigner); !errors.Is(err, signing.ErrSignatureInvalid) {
		t.Fatalf("issuer naming another certificate: got %v", err)
	}
}

func TestParseTrustedKey(t *testing.T) {
	key := newKey(t)
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"PKIX":        pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
		"PKCS1":       pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)}),
		"certificate": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certificate(t, "x", key, nil, nil).Raw}),
	} {
		k, err := signing.ParseTrustedKey(data)
		if err != nil || !k.PublicKey.Equal(&key.PublicKey) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := signing.ParseTrustedKey(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})); err == nil {
		t.Error("a private key was accepted as a trusted key")
	}
}

// TestKeySizesOutsideTheRangeAreRejected: RSA keys below 2048 or above 8192 bits are refused as trusted keys, in
// every PEM form, with ErrKeyRejected, and so is a signer certificate's key of such a size even when it chains to
// a trusted CA; the sizes at the bounds are accepted. The large keys' moduli are made up: only their size is
// checked before any arithmetic, and generating a real 8200-bit key takes minutes.
func TestKeySizesOutsideTheRangeAreRejected(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	pemKeys := func(pub *rsa.PublicKey) map[string][]byte {
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{
			"PKIX":  pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}),
			"PKCS1": pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)}),
		}
	}
	for _, tc := range []struct {
		name     string
		pub      *rsa.PublicKey
		rejected bool
	}{
		{"1024", &small.PublicKey, true},
		{"2047", modulusOfSize(2047), true},
		{"2048", modulusOfSize(2048), false},
		{"8192", modulusOfSize(8192), false},
		{"8200", modulusOfSize(8200), true},
		{"524288", modulusOfSize(512 << 10), true},
	} {
		for form, data := range pemKeys(tc.pub) {
			t.Run(tc.name+"/"+form, func(t *testing.T) {
				_, err := signing.ParseTrustedKey(data)
				if tc.rejected != errors.Is(err, signing.ErrKeyRejected) || !tc.rejected && err != nil {
					t.Errorf("got %v, want rejected=%v", err, tc.rejected)
				}
				if _, err := signing.ParseKeys(map[string][]byte{"acme": data}); tc.rejected != errors.Is(err, signing.ErrKeyRejected) {
					t.Errorf("ParseKeys: got %v, want rejected=%v", err, tc.rejected)
				}
			})
		}
	}
	t.Run("certificate", func(t *testing.T) {
		cert := certificate(t, "small", small, nil, nil)
		if _, err := signing.ParseTrustedKey(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})); !errors.Is(err, signing.ErrKeyRejected) {
			t.Errorf("a certificate of a 1024-bit key: got %v, want ErrKeyRejected", err)
		}
	})
	t.Run("signer-certificate", func(t *testing.T) {
		caKey := newKey(t)
		ca := certificate(t, "acme CA", caKey, nil, nil)
		signer := certificate(t, "acme signer", small, ca, caKey)
		signed, err := signing.Sign(descriptor(t), "acme", small, signing.SignOptions{Certificate: signer})
		if err != nil {
			t.Fatal(err)
		}
		_, err = signing.Verify(signed, nil, signing.Keys{"acme": {PublicKey: &caKey.PublicKey, Certificate: ca}})
		if !errors.Is(err, signing.ErrSignatureInvalid) || !errors.Is(err, signing.ErrKeyRejected) {
			t.Errorf("a signer certificate of a 1024-bit key: got %v, want SignatureInvalid for a rejected key", err)
		}
	})
}

// modulusOfSize is an RSA public key of the given size in bits; not a product of two primes, which the size check
// does not need.
func modulusOfSize(bits int) *rsa.PublicKey {
	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	return &rsa.PublicKey{N: n.Or(n, big.NewInt(1)), E: 65537}
}

// descriptor is a component descriptor with every kind of field the signature covers or excludes.
func descriptor(t testing.TB) []byte {
	t.Helper()
	return []byte(`{"meta":{"schemaVersion":"v2"},"component":{"name":"acme.org/app","version":"1.0.0","provider":"acme",
	"creationTime":"2026-01-01T00:00:00Z","labels":[{"name":"signed","value":{"a":1},"signing":true},{"name":"plain","value":"x"}],
	"repositoryContexts":[],
	"resources":[{"name":"chart","version":"6.9.1","type":"helmChart","relation":"external",
	  "access":{"type":"ociArtifact","imageReference":"ghcr.io/stefanprodan/charts/podinfo:6.9.1"},
	  "digest":{"hashAlgorithm":"SHA-256","normalisationAlgorithm":"genericBlobDigest/v1","value":"` + strings.Repeat("a", 64) + `"}}],
	"sources":[{"name":"src","version":"1.0.0","type":"git","access":{"type":"gitHub","commit":"def"}}],
	"componentReferences":[{"name":"ref-0","componentName":"acme.org/lib","version":"1.0.0","labels":[{"name":"l","value":"v"}],
	  "digest":{"hashAlgorithm":"SHA-256","normalisationAlgorithm":"jsonNormalisation/v4alpha1","value":"` + strings.Repeat("c", 64) + `"}}]}}`)
}

func edit(t testing.TB, doc []byte, f func(map[string]any)) []byte {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	f(d)
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func comp(d map[string]any) map[string]any { return d["component"].(map[string]any) }
func res(d map[string]any) map[string]any  { return comp(d)["resources"].([]any)[0].(map[string]any) }
func ref(d map[string]any) map[string]any {
	return comp(d)["componentReferences"].([]any)[0].(map[string]any)
}
func sig(d map[string]any) map[string]any   { return d["signatures"].([]any)[0].(map[string]any) }
func label(m map[string]any) map[string]any { return m["labels"].([]any)[0].(map[string]any) }

// flipPEM changes one bit of a PEM signature.
func flipPEM(info map[string]any) {
	block, rest := pem.Decode([]byte(info["value"].(string)))
	block.Bytes[len(block.Bytes)/2] ^= 1
	info["value"] = string(pem.EncodeToMemory(block)) + string(rest)
}

var testKey *rsa.PrivateKey

// newKey returns a fresh 2048-bit key; the first is kept for tests that need only one.
func newKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if testKey == nil {
		testKey = key
	}
	return key
}

func keysOf(t testing.TB, name string, pub *rsa.PublicKey) signing.Keys {
	t.Helper()
	return signing.Keys{name: {PublicKey: pub}}
}

// certificate issues a code-signing certificate for key, signed by parent (self-signed CA when parent is nil).
func certificate(t testing.TB, cn string, key *rsa.PrivateKey, parent *x509.Certificate, parentKey *rsa.PrivateKey) *x509.Certificate {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// BenchmarkVerify measures the CPU cost of verifying one signature: normalisation (v4alpha1), SHA-256 and an
// RSA-2048 PSS verification.
func BenchmarkVerify(b *testing.B) {
	key := newKey(b)
	signed, err := signing.Sign(descriptor(b), "acme", key, signing.SignOptions{})
	if err != nil {
		b.Fatal(err)
	}
	keys := keysOf(b, "acme", &key.PublicKey)
	for b.Loop() {
		if _, err := signing.Verify(signed, nil, keys); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerifyAnyNameKey: a key for any name verifies a descriptor when one of its signatures verifies with it; the
// signatures of other signers do not matter, unless a name is required.
func TestVerifyAnyNameKey(t *testing.T) {
	mine, theirs := newKey(t), newKey(t)
	signed, err := signing.Sign(descriptor(t), "theirs", theirs, signing.SignOptions{})
	if err != nil {
		t.Fatal(err)
	}
	any := keysOf(t, signing.AnyName, &mine.PublicKey)
	if _, err := signing.Verify(signed, nil, any); !errors.Is(err, signing.ErrSignatureInvalid) {
		t.Fatalf("only another signer's signature: got %v", err)
	}
	if signed, err = signing.Sign(signed, "mine", mine, signing.SignOptions{Algorithm: signing.AlgorithmRSASSAPKCS1V15}); err != nil {
		t.Fatal(err)
	}
	if names, err := signing.Verify(signed, nil, any); err != nil || len(names) != 1 || names[0] != "mine" {
		t.Fatalf("own signature among others: %v %v", names, err)
	}
	if _, err := signing.Verify(signed, []string{"theirs"}, any); !errors.Is(err, signing.ErrSignatureInvalid) {
		t.Fatalf("required signature by another key: got %v", err)
	}
}
